// Command images writes Hookline's container images as OCI image layouts,
// one per binary, without a Docker daemon (make images):
//
//	go run ./deploy/cmd/images --bin bin/images/linux-amd64 --out bin/images \
//	    --version v0.1.0 --revision $(git rev-parse HEAD) --created 2026-12-01T12:00:00Z
//
// --bin holds the static linux binaries ingest, dispatcher, scheduler and
// hookline (CGO_ENABLED=0); each becomes --out/<name>, an OCI layout whose
// index names the image hookline/<name>:<version>. Load one into a
// registry or a runtime with any OCI tool, e.g.
// `crane push bin/images/ingest registry.example/hookline/ingest:v0.1.0`,
// `skopeo copy oci:bin/images/ingest docker://…` or `podman load`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/hookline/hookline/deploy/image"
)

// Names are the binaries that get an image.
var Names = []string{"ingest", "dispatcher", "scheduler", "hookline"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		binDir, out, created string
		s                    image.Spec
	)
	flag.StringVar(&binDir, "bin", "bin/images/linux-"+runtime.GOARCH, "directory of the static linux binaries")
	flag.StringVar(&out, "out", "bin/images", "directory the OCI layouts are written to, one subdirectory per image")
	flag.StringVar(&s.Arch, "arch", runtime.GOARCH, "GOARCH the binaries were built for")
	flag.StringVar(&s.Source, "source", "https://github.com/hookline/hookline", "org.opencontainers.image.source label")
	flag.StringVar(&s.Revision, "revision", "unknown", "org.opencontainers.image.revision label: the commit built")
	flag.StringVar(&s.Version, "version", "dev", "org.opencontainers.image.version label and the image tag")
	flag.StringVar(&created, "created", "1970-01-01T00:00:00Z", "RFC 3339 creation time of the images and their files (the commit's time keeps builds reproducible)")
	flag.Parse()
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		return fmt.Errorf("--created: %w", err)
	}
	s.Created = t.UTC()
	for _, name := range Names {
		spec := s
		spec.Name, spec.Binary = name, filepath.Join(binDir, name)
		img, err := image.Build(spec)
		if err != nil {
			return err
		}
		ref := "hookline/" + name + ":" + s.Version
		if err := image.WriteLayout(filepath.Join(out, name), ref, img); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%-40s %s  %s\n", ref, d, filepath.Join(out, name))
	}
	return nil
}
