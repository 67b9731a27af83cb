package image

import (
	"archive/tar"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Files returns every regular file and directory of img's flattened
// filesystem, by absolute path.
func Files(t *testing.T, img v1.Image) map[string]tarEntry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]tarEntry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out["/"+strings.TrimSuffix(h.Name, "/")] = tarEntry{h, data}
	}
}

type tarEntry struct {
	h    *tar.Header
	data []byte
}

// checkImage asserts what every Hookline image promises: the entrypoint
// is the named binary, the user is 65532, the labels are set, CA
// certificates and the passwd entry are there, and there is no shell or
// any other file than the base's and the binary. It returns the binary.
func checkImage(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Fatalf("%s: manifest media type %q (%v), want OCI", name, mt, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	bin := BinDir + "/" + name
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != bin {
		t.Errorf("%s: entrypoint %q, want [%s]", name, got, bin)
	}
	if len(cf.Config.Cmd) != 0 {
		t.Errorf("%s: cmd %q, want none", name, cf.Config.Cmd)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532", name, cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("%s: platform %s/%s", name, cf.OS, cf.Architecture)
	}
	for _, k := range []string{LabelSource, LabelRevision, LabelVersion, LabelCreated, LabelTitle} {
		if cf.Config.Labels[k] == "" {
			t.Errorf("%s: label %s missing (labels %v)", name, k, cf.Config.Labels)
		}
	}
	files := Files(t, img)
	allowed := map[string]bool{bin: true}
	for _, f := range []string{"/etc", "/etc/passwd", "/etc/group", "/etc/ssl", "/etc/ssl/certs", CAFile, "/home", "/home/nonroot", "/tmp", "/usr", "/usr/local", BinDir} {
		allowed[f] = true
		if _, ok := files[f]; !ok {
			t.Errorf("%s: %s missing from the image", name, f)
		}
	}
	for f := range files {
		if !allowed[f] {
			t.Errorf("%s: unexpected file %s in the image", name, f)
		}
		switch filepath.Base(f) {
		case "sh", "bash", "ash", "dash", "busybox":
			t.Errorf("%s: a shell in the image: %s", name, f)
		}
	}
	if !strings.Contains(string(files["/etc/passwd"].data), "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd has no nonroot 65532: %q", name, files["/etc/passwd"].data)
	}
	if h := files["/home/nonroot"].h; h == nil || h.Uid != UID {
		t.Errorf("%s: /home/nonroot not owned by 65532", name)
	}
	if h := files[bin].h; h == nil || h.Mode&0o111 == 0 || h.Uid != 0 {
		t.Errorf("%s: binary not executable or not root-owned (header %+v)", name, h)
	}
	certs, rest := 0, files[CAFile].data
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatalf("%s: a CA certificate does not parse: %v", name, err)
		}
		certs++
	}
	if certs < 100 {
		t.Errorf("%s: %d CA certificates, want the NSS roots (over 100)", name, certs)
	}
	return files[bin].data
}

func TestBuildReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "ingest")
	if err := os.WriteFile(bin, []byte("not really a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Name: "ingest", Binary: bin, Arch: "amd64", Source: "https://example.com/hookline", Revision: strings.Repeat("a", 40), Version: "v1.2.3",
		Created: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := checkImage(t, img, "ingest"); string(got) != "not really a binary" {
		t.Fatalf("binary in the image: %q", got)
	}
	again, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Fatalf("two builds of one spec differ: %s, %s", d1, d2)
	}
	out := filepath.Join(dir, "layout")
	if err := WriteLayout(out, "hookline/ingest:v1.2.3", img); err != nil {
		t.Fatal(err)
	}
	read, ref := readLayout(t, out)
	if ref != "hookline/ingest:v1.2.3" {
		t.Errorf("layout's ref name %q", ref)
	}
	if d3, _ := read.Digest(); d3 != d1 {
		t.Fatalf("layout holds %s, built %s", d3, d1)
	}
}

// readLayout returns the one image of the OCI layout at dir and the name
// its index gives it.
func readLayout(t *testing.T, dir string) (v1.Image, string) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("%s: %d manifests in the index, want 1", dir, len(im.Manifests))
	}
	desc := im.Manifests[0]
	img, err := p.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img, desc.Annotations[RefName]
}
