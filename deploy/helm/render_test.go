// Package helm holds the test of the Hookline chart in hookline/: it
// renders the chart with helm template and decodes every manifest
// strictly into the k8s.io/api types (an unknown or misspelt field fails).
package helm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// helmBin is the helm make installs into bin/tools (HOOKLINE_HELM
// overrides).
func helmBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HOOKLINE_HELM"); p != "" {
		return p
	}
	p, err := filepath.Abs("../../bin/tools/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("helm not found at %s: run make helm (make lint and make test install it)", p)
	}
	return p
}

// kubeVersion is the Kubernetes version the chart is rendered for: the
// one of the k8s.io/api types the manifests are decoded into.
const kubeVersion = "1.37.0"

// render runs helm template on the chart with values files and --set
// pairs; it returns helm's output and error.
func render(t *testing.T, sets []string, values ...string) (string, error) {
	t.Helper()
	args := []string{"template", "hl", "hookline", "--namespace", "hooks", "--kube-version", kubeVersion}
	for _, v := range values {
		args = append(args, "--values", v)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.CommandContext(t.Context(), helmBin(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.String(), err
	}
	return string(out), nil
}

// manifests are the decoded objects of one rendering.
type manifests struct {
	deployments  []appsv1.Deployment
	statefulsets []appsv1.StatefulSet
	services     []corev1.Service
	accounts     []corev1.ServiceAccount
	pdbs         []policyv1.PodDisruptionBudget
	hpas         []autoscalingv2.HorizontalPodAutoscaler
}

// decode splits helm's output into documents and decodes each strictly
// into the type its apiVersion and kind name.
func decode(t *testing.T, out string) manifests {
	t.Helper()
	var m manifests
	for _, doc := range strings.Split(out, "\n---\n") {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("a manifest is not YAML: %v\n%s", err, doc)
		}
		if head.Kind == "" {
			continue // only comments (the # Source: line)
		}
		what := head.APIVersion + " " + head.Kind
		var err error
		switch what {
		case "apps/v1 Deployment":
			err = strictAppend(doc, &m.deployments)
		case "apps/v1 StatefulSet":
			err = strictAppend(doc, &m.statefulsets)
		case "v1 Service":
			err = strictAppend(doc, &m.services)
		case "v1 ServiceAccount":
			err = strictAppend(doc, &m.accounts)
		case "policy/v1 PodDisruptionBudget":
			err = strictAppend(doc, &m.pdbs)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			err = strictAppend(doc, &m.hpas)
		default:
			t.Fatalf("unexpected manifest %s", what)
		}
		if err != nil {
			t.Fatalf("%s does not decode strictly: %v\n%s", what, err, doc)
		}
	}
	return m
}

// strictAppend decodes doc into a new T, refusing unknown and duplicate
// fields, and appends it to list.
func strictAppend[T any](doc string, list *[]T) error {
	var o T
	if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil {
		return err
	}
	*list = append(*list, o)
	return nil
}

func env(c corev1.Container, name string) (corev1.EnvVar, int) {
	for i, e := range c.Env {
		if e.Name == name {
			return e, i
		}
	}
	return corev1.EnvVar{}, -1
}

// checkPod asserts the restrictive security context, probes and resources
// every Hookline pod has, and that every volume mount has its volume.
func checkPod(t *testing.T, what string, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod security context %+v, want non-root 65532 with seccomp RuntimeDefault", what, psc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: the service account token is mounted", what)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers", what, len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || (sc.Privileged != nil && *sc.Privileged) {
		t.Errorf("%s: container security context %+v, want read-only root, no privilege escalation, ALL capabilities dropped", what, sc)
	}
	if c.ReadinessProbe == nil || c.LivenessProbe == nil || c.StartupProbe == nil {
		t.Errorf("%s: probes missing (readiness %v, liveness %v, startup %v)", what, c.ReadinessProbe != nil, c.LivenessProbe != nil, c.StartupProbe != nil)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: resources %+v, want cpu and memory requests and a memory limit", what, c.Resources)
	}
	if !strings.HasPrefix(c.Image, "hookline/hookline-") && !strings.Contains(c.Image, "/hookline/hookline-") {
		t.Errorf("%s: image %q", what, c.Image)
	}
	vols := map[string]bool{}
	for _, v := range spec.Volumes {
		vols[v.Name] = true
	}
	for _, vm := range c.VolumeMounts {
		if !vols[vm.Name] {
			t.Errorf("%s: mount %s has no volume", what, vm.Name)
		}
		// Writable: /tmp, and the dispatcher's answers journal.
		if vm.Name != "tmp" && vm.Name != "answers" && !vm.ReadOnly {
			t.Errorf("%s: mount %s is writable", what, vm.Name)
		}
	}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "HOOKLINE_") && !strings.HasPrefix(e.Name, "OTEL_") && e.Name != "POD_NAME" {
			t.Errorf("%s: environment variable %s is not a HOOKLINE_* setting", what, e.Name)
		}
	}
	if _, i := env(c, "HOOKLINE_KAFKA_BROKERS"); i < 0 {
		t.Errorf("%s: no HOOKLINE_KAFKA_BROKERS", what)
	}
	return c
}

// TestChartDefaults renders the chart with its default values: ingest a
// Deployment with Service, PDB and HPA; dispatcher and scheduler
// StatefulSets whose transactional id is the topic prefix plus the pod
// name; every manifest strict.
func TestChartDefaults(t *testing.T) {
	out, err := render(t, nil)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	m := decode(t, out)
	if len(m.deployments) != 1 || len(m.statefulsets) != 2 || len(m.services) != 3 || len(m.pdbs) != 3 || len(m.hpas) != 1 || len(m.accounts) != 1 {
		t.Fatalf("rendered %d deployments, %d statefulsets, %d services, %d PDBs, %d HPAs, %d service accounts; want 1, 2, 3, 3, 1, 1",
			len(m.deployments), len(m.statefulsets), len(m.services), len(m.pdbs), len(m.hpas), len(m.accounts))
	}

	in := m.deployments[0]
	if in.Name != "hl-hookline-ingest" {
		t.Errorf("ingest deployment named %q", in.Name)
	}
	if in.Spec.Replicas != nil {
		t.Errorf("ingest replicas set (%d) while the HPA scales it", *in.Spec.Replicas)
	}
	c := checkPod(t, "ingest", in.Spec.Template.Spec)
	if c.ReadinessProbe.GRPC == nil || c.ReadinessProbe.GRPC.Port != 7070 {
		t.Errorf("ingest readiness probe %+v, want gRPC health on 7070", c.ReadinessProbe)
	}
	if e, _ := env(c, "HOOKLINE_GRPC_ADDR"); e.Value != ":7070" {
		t.Errorf("ingest HOOKLINE_GRPC_ADDR %q", e.Value)
	}
	if e, _ := env(c, "HOOKLINE_API_KEYS_FILE"); e.Value != "/etc/hookline/api-keys/keys" {
		t.Errorf("ingest HOOKLINE_API_KEYS_FILE %q", e.Value)
	}
	if e, _ := env(c, "HOOKLINE_SECRETS_KEY_FILE"); e.Value != "/etc/hookline/secrets-key/secrets.keys" {
		t.Errorf("ingest HOOKLINE_SECRETS_KEY_FILE %q", e.Value)
	}
	for _, name := range []string{"HOOKLINE_GRPC_TLS_CERT", "HOOKLINE_GRPC_TLS_KEY", "HOOKLINE_GRPC_CLIENT_CA"} {
		if _, i := env(c, name); i >= 0 {
			t.Errorf("ingest sets %s without ingest.tls", name)
		}
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Errorf("ingest has no preStop sleep (there is no shell in the image to run one)")
	}
	if g := in.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("ingest grace period %v, want 15 s shutdown + 5 s preStop + 10 s", g)
	}
	hpa := m.hpas[0]
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != in.Name || hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != 2 {
		t.Errorf("HPA %+v does not scale the ingest deployment from 2", hpa.Spec)
	}

	for _, ss := range m.statefulsets {
		comp := strings.TrimPrefix(ss.Name, "hl-hookline-")
		c := checkPod(t, comp, ss.Spec.Template.Spec)
		txnEnv := "HOOKLINE_" + strings.ToUpper(comp) + "_TRANSACTIONAL_ID"
		txn, ti := env(c, txnEnv)
		pod, pi := env(c, "POD_NAME")
		if ti < 0 || txn.Value != "hookline.$(POD_NAME)" || pi < 0 || pi > ti || pod.ValueFrom == nil || pod.ValueFrom.FieldRef == nil || pod.ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Errorf("%s: %s = %+v, POD_NAME = %+v: want the topic prefix plus the pod name, POD_NAME from metadata.name defined first", comp, txnEnv, txn, pod)
		}
		if e, _ := env(c, "HOOKLINE_HEALTH_ADDR"); e.Value != ":8086" {
			t.Errorf("%s: HOOKLINE_HEALTH_ADDR %q", comp, e.Value)
		}
		if p := c.ReadinessProbe.HTTPGet; p == nil || p.Path != "/readyz" || p.Port.String() != "health" {
			t.Errorf("%s: readiness probe %+v, want GET /readyz on health", comp, c.ReadinessProbe)
		}
		if p := c.LivenessProbe.HTTPGet; p == nil || p.Path != "/healthz" {
			t.Errorf("%s: liveness probe %+v, want GET /healthz", comp, c.LivenessProbe)
		}
		if ss.Spec.ServiceName != ss.Name || !slices.ContainsFunc(m.services, func(s corev1.Service) bool { return s.Name == ss.Name && s.Spec.ClusterIP == corev1.ClusterIPNone }) {
			t.Errorf("%s: no headless service %s", comp, ss.Spec.ServiceName)
		}
		if ss.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
			t.Errorf("%s: update strategy %q", comp, ss.Spec.UpdateStrategy.Type)
		}
		_, si := env(c, "HOOKLINE_SECRETS_KEY_FILE")
		if (comp == "dispatcher") != (si >= 0) {
			t.Errorf("%s: HOOKLINE_SECRETS_KEY_FILE set: %v (the dispatcher opens endpoint secrets; the scheduler does not)", comp, si >= 0)
		}
		if comp == "dispatcher" {
			if e, _ := env(c, "HOOKLINE_DISPATCHER_DRAIN_TIMEOUT"); e.Value != "15s" {
				t.Errorf("dispatcher drain timeout %q", e.Value)
			}
			if g := ss.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 45 {
				t.Errorf("dispatcher grace period %v, want 15 s drain + 30 s", g)
			}
		}
	}
}

// TestChartOptions renders every option at once: TLS and mutual TLS at
// ingest, Kafka TLS and SASL, OTEL settings, extra HOOKLINE_* variables,
// a fixed ingest replica count without the HPA.
func TestChartOptions(t *testing.T) {
	vals := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vals, []byte(`
image: {registry: registry.example.com/, tag: "1.2.3"}
kafka:
  brokers: [k1:9093, k2:9093]
  topicPrefix: prod.
  tls: {enabled: true, secretName: kafka-ca, clientCert: true, serverName: kafka.internal}
  sasl: {mechanism: SCRAM-SHA-512, secretName: kafka-user}
otel: {OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318"}
ingest:
  hpa: {enabled: false}
  replicas: 4
  tls: {secretName: ingest-tls, clientCASecret: ingest-client-ca}
  env: {HOOKLINE_MAX_PAYLOAD_BYTES: 262144}
dispatcher:
  drainTimeoutSeconds: 20
  egressProxy: "http://egress.hookline.svc:4750"
  tenantEgressProxies: {acme: "http://10.1.0.5:4750", beta: direct}
  env: {HOOKLINE_RATE_LIMIT: "50"}
secretsKey: {existingSecret: ""}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := render(t, nil, vals)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	m := decode(t, out)
	if len(m.hpas) != 0 || len(m.deployments) != 1 || m.deployments[0].Spec.Replicas == nil || *m.deployments[0].Spec.Replicas != 4 {
		t.Fatalf("with the HPA off: %d HPAs, ingest replicas %v", len(m.hpas), m.deployments[0].Spec.Replicas)
	}
	c := checkPod(t, "ingest", m.deployments[0].Spec.Template.Spec)
	if c.Image != "registry.example.com/hookline/hookline-ingest:1.2.3" {
		t.Errorf("ingest image %q", c.Image)
	}
	want := map[string]string{
		"HOOKLINE_GRPC_TLS_CERT":         "/etc/hookline/grpc-tls/tls.crt",
		"HOOKLINE_GRPC_TLS_KEY":          "/etc/hookline/grpc-tls/tls.key",
		"HOOKLINE_GRPC_CLIENT_CA":        "/etc/hookline/grpc-client-ca/ca.crt",
		"HOOKLINE_KAFKA_BROKERS":         "k1:9093,k2:9093",
		"HOOKLINE_KAFKA_TLS":             "true",
		"HOOKLINE_KAFKA_TLS_CA":          "/etc/hookline/kafka-tls/ca.crt",
		"HOOKLINE_KAFKA_TLS_CERT":        "/etc/hookline/kafka-tls/tls.crt",
		"HOOKLINE_KAFKA_TLS_SERVER_NAME": "kafka.internal",
		"HOOKLINE_KAFKA_SASL_MECHANISM":  "SCRAM-SHA-512",
		"HOOKLINE_MAX_PAYLOAD_BYTES":     "262144",
		"OTEL_EXPORTER_OTLP_ENDPOINT":    "http://collector:4318",
	}
	for k, v := range want {
		if e, _ := env(c, k); e.Value != v {
			t.Errorf("ingest %s = %q, want %q", k, e.Value, v)
		}
	}
	if e, _ := env(c, "HOOKLINE_KAFKA_SASL_PASSWORD"); e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "kafka-user" {
		t.Errorf("SASL password not from the kafka-user Secret: %+v", e)
	}
	if _, i := env(c, "HOOKLINE_SECRETS_KEY_FILE"); i >= 0 {
		t.Errorf("secrets key file set with secretsKey.existingSecret empty")
	}
	if c.ReadinessProbe.TCPSocket == nil {
		t.Errorf("with TLS at ingest the probes cannot speak plaintext gRPC: %+v", c.ReadinessProbe)
	}
	for _, ss := range m.statefulsets {
		c := checkPod(t, ss.Name, ss.Spec.Template.Spec)
		if e, _ := env(c, "HOOKLINE_"+strings.ToUpper(strings.TrimPrefix(ss.Name, "hl-hookline-"))+"_TRANSACTIONAL_ID"); e.Value != "prod.$(POD_NAME)" {
			t.Errorf("%s: transactional id %q, want prod.$(POD_NAME)", ss.Name, e.Value)
		}
		if strings.HasSuffix(ss.Name, "dispatcher") {
			dir, _ := env(c, "HOOKLINE_DISPATCHER_ANSWERS_DIR")
			if !slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == "answers" && vm.MountPath == dir.Value }) {
				t.Errorf("dispatcher answers dir %q is not its answers volume's mount (%+v)", dir.Value, c.VolumeMounts)
			}
			if g := ss.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 50 {
				t.Errorf("dispatcher grace period %v, want 20 s drain + 30 s", g)
			}
			if e, _ := env(c, "HOOKLINE_RATE_LIMIT"); e.Value != "50" {
				t.Errorf("dispatcher extra env HOOKLINE_RATE_LIMIT %q", e.Value)
			}
			if e, _ := env(c, "HOOKLINE_EGRESS_PROXY"); e.Value != "http://egress.hookline.svc:4750" {
				t.Errorf("dispatcher HOOKLINE_EGRESS_PROXY %q, want dispatcher.egressProxy", e.Value)
			}
			if e, _ := env(c, "HOOKLINE_TENANT_EGRESS_PROXY"); e.Value != "acme=http://10.1.0.5:4750,beta=direct" {
				t.Errorf("dispatcher HOOKLINE_TENANT_EGRESS_PROXY %q, want dispatcher.tenantEgressProxies as tenant=proxy pairs", e.Value)
			}
		}
	}
}

// TestChartSchemaRefuses: values.schema.json refuses what the services
// would refuse or misread.
func TestChartSchemaRefuses(t *testing.T) {
	for _, set := range [][]string{
		{"kafka.partitions=0"},
		{"kafka.brokers=null"},
		{"kafka.retention=7days"},
		{"dispatcher.replicas=0"},
		{"ingest.env.lower_case=x"},
		{"logLevel=verbose"},
		{"ingest.hpa.maxReplica=3"}, // a typo: unknown key
		{"replicas=3"},              // unknown top-level key
	} {
		out, err := render(t, set)
		if err == nil {
			t.Errorf("--set %v rendered; want the schema to refuse it", set)
			continue
		}
		if !strings.Contains(out, "schema") && !strings.Contains(out, "values don't meet the specifications") {
			t.Errorf("--set %v refused, but not by the schema: %s", set, out)
		}
	}
}

// TestChartConsole: the console is off by default; on, it needs a TLS
// Secret, gets a session key Secret the chart makes (or the one named),
// and the console's client CA when one is named.
func TestChartConsole(t *testing.T) {
	out, err := render(t, nil)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	if strings.Contains(out, "HOOKLINE_CONSOLE_ADDR") {
		t.Fatal("the console is on by default")
	}
	if out, err := render(t, []string{"ingest.console.enabled=true"}); err == nil || !strings.Contains(out, "ingest.console.tlsSecret") {
		t.Fatalf("a console without a TLS Secret rendered: %v\n%s", err, out)
	}
	out, err = render(t, []string{"ingest.console.enabled=true", "ingest.console.tlsSecret=console-tls", "ingest.console.clientCASecret=console-ca"})
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	for _, want := range []string{
		"name: hl-hookline-console-session", "kind: Secret",
		"HOOKLINE_CONSOLE_SESSION_KEY_FILE", "/etc/hookline/console-session/session.key",
		"HOOKLINE_CONSOLE_CLIENT_CA", "secretName: console-ca", "secretName: console-tls",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the console rendering lacks %q", want)
		}
	}
	out, err = render(t, []string{"ingest.console.enabled=true", "ingest.console.tlsSecret=console-tls", "ingest.console.sessionKey.existingSecret=my-console-key"})
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	if strings.Contains(out, "name: hl-hookline-console-session") || !strings.Contains(out, "secretName: my-console-key") {
		t.Errorf("with sessionKey.existingSecret the chart still makes its own Secret, or does not mount the named one")
	}
}
