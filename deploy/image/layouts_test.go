package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// envImages names the directory `make images` wrote (bin/images); make
// test-deploy sets it. Without it the built images are not checked here
// (TestBuildReproducible still checks the builder).
const envImages = "HOOKLINE_TEST_IMAGES"

// TestImageLayouts reads every image make images wrote: its config
// (entrypoint, user 65532, labels with the commit), its filesystem (CA
// certificates, no shell, nothing but the base and the binary), then runs
// the binary taken out of the image with -h.
func TestImageLayouts(t *testing.T) {
	dir := os.Getenv(envImages)
	if dir == "" {
		t.Skipf("%s not set: run make images, then this test with %s=bin/images (make test-deploy does)", envImages, envImages)
	}
	for _, name := range []string{"ingest", "dispatcher", "scheduler", "hookline"} {
		t.Run(name, func(t *testing.T) {
			img, ref := readLayout(t, filepath.Join(dir, name))
			bin := checkImage(t, img, name)
			cf, _ := img.ConfigFile()
			if want := "hookline/" + name + ":" + cf.Config.Labels[LabelVersion]; ref != want {
				t.Errorf("layout's ref name %q, want %q", ref, want)
			}
			if rev := cf.Config.Labels[LabelRevision]; !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(rev) {
				t.Errorf("revision label %q is not a commit", rev)
			}
			exe := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(exe, bin, 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.CommandContext(t.Context(), exe, "-h").CombinedOutput()
			if err != nil {
				t.Fatalf("%s -h: %v\n%s", name, err, out)
			}
			want := "Usage of " + name + ":"
			if name == "hookline" {
				want = "hookline dev"
			}
			if !strings.Contains(string(out), want) {
				t.Fatalf("%s -h printed no usage (%q):\n%s", name, want, out)
			}
			if (name == "dispatcher" || name == "scheduler") && !strings.Contains(string(out), "-health-addr") {
				t.Errorf("%s -h lists no -health-addr", name)
			}
		})
	}
}
