// Package image assembles Hookline's container images without a Docker
// daemon, with go-containerregistry: an OCI image per binary on an empty
// base that carries only CA certificates, /etc/passwd and /etc/group with
// the non-root user nonroot (uid and gid 65532), a home directory and
// /tmp. No shell, no package manager, nothing else: the binary is static
// (CGO_ENABLED=0).
//
// The images are reproducible: every file has a fixed owner and the
// modification time Created, the CA bundle comes from a pinned Go module
// (golang.org/x/crypto/x509roots/fallback, Mozilla's NSS roots), and
// gzip is deterministic, so the same binary and Spec give the same
// digest on any machine.
package image

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The user every image runs as.
const (
	UID      = 65532
	UserName = "nonroot"
	// CAFile is where the CA bundle lives; SSL_CERT_FILE points to it.
	CAFile = "/etc/ssl/certs/ca-certificates.crt"
	// BinDir is where the binary lives.
	BinDir = "/usr/local/bin"
)

// Label keys of the OCI image spec's annotations, set on every image.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	LabelLicenses = "org.opencontainers.image.licenses"
	// RefName names an image inside an OCI layout's index.
	RefName = "org.opencontainers.image.ref.name"
)

// Spec is one image to build.
type Spec struct {
	// Name is the binary's name in the image (ingest, dispatcher,
	// scheduler, hookline) and the image's title.
	Name string
	// Binary is the path of the static linux binary to put in.
	Binary string
	// Arch is the binary's GOARCH.
	Arch string
	// Source, Revision and Version go to the labels of the same names.
	Source, Revision, Version string
	// Created is every file's modification time and the image's
	// creation time (the commit's time, for reproducible images).
	Created time.Time
}

// Build returns the image of s.
func Build(s Spec) (v1.Image, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.Name, err)
	}
	base, err := baseLayer(s.Created)
	if err != nil {
		return nil, err
	}
	app, err := layer([]file{{name: path.Join(BinDir, s.Name), mode: 0o755, data: bin}}, s.Created)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "hookline base: CA certificates, /etc/passwd (nonroot 65532), /tmp", Comment: "built by deploy/image"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "hookline " + s.Name + " binary", Comment: "built by deploy/image"}},
	)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = s.Arch, "linux"
	cf.Created = v1.Time{Time: s.Created}
	cf.Author = "Hookline"
	cf.Config = v1.Config{
		Entrypoint: []string{path.Join(BinDir, s.Name)},
		User:       fmt.Sprintf("%d:%d", UID, UID),
		WorkingDir: "/home/" + UserName,
		Env:        []string{"SSL_CERT_FILE=" + CAFile, "HOME=/home/" + UserName},
		Labels:     Labels(s),
	}
	return mutate.ConfigFile(img, cf)
}

// Labels returns the OCI labels of s's image.
func Labels(s Spec) map[string]string {
	return map[string]string{
		LabelSource:   s.Source,
		LabelRevision: s.Revision,
		LabelVersion:  s.Version,
		LabelCreated:  s.Created.UTC().Format(time.RFC3339),
		LabelTitle:    "hookline-" + s.Name,
		LabelLicenses: "Apache-2.0",
	}
}

// WriteLayout writes img as an OCI image layout in dir (replaced if it
// exists), its index entry named ref.
func WriteLayout(dir, ref string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{RefName: ref}))
}

// CABundle returns the PEM bundle of the unconstrained roots of Mozilla's
// NSS trust store at the pinned x509roots/fallback version. Roots with a
// distrust-after constraint are left out: a PEM file cannot carry it.
func CABundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}

type file struct {
	name string // absolute
	mode int64
	uid  int
	data []byte
	dir  bool
}

func baseLayer(created time.Time) (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", UserName, UID, UID, UserName, UserName)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, UID)
	return layer([]file{
		{name: "/etc", dir: true, mode: 0o755},
		{name: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "/etc/group", mode: 0o644, data: []byte(group)},
		{name: "/etc/ssl", dir: true, mode: 0o755},
		{name: "/etc/ssl/certs", dir: true, mode: 0o755},
		{name: CAFile, mode: 0o644, data: CABundle()},
		{name: "/home", dir: true, mode: 0o755},
		{name: "/home/" + UserName, dir: true, mode: 0o700, uid: UID},
		{name: "/tmp", dir: true, mode: 0o1777},
		{name: "/usr", dir: true, mode: 0o755},
		{name: "/usr/local", dir: true, mode: 0o755},
		{name: BinDir, dir: true, mode: 0o755},
	}, created)
}

// layer returns a gzipped tar layer of files, in name order, each owned
// by its uid (root by default) and modified at created.
func layer(files []file, created time.Time) (v1.Layer, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name[1:],
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.uid,
			ModTime: created,
			Format:  tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
