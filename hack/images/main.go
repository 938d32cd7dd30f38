// Command images builds, signs and verifies TauGrid's container images with
// no container engine and no base image pulled (see docs/images.md):
//
//	go run ./hack/images build  [--out build/images] [--platforms linux/amd64,linux/arm64] [--key FILE]
//	go run ./hack/images verify [--out build/images] [--public-key FILE]
//	go run ./hack/images publish --registry HOST/PATH [--out build/images] [--chart charts/taugrid] [--key FILE]
//
// `make images`, `make verify-images` and `make publish` run these.
package main

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/taugrid/taugrid/hack/images/imagebuild"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "images:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("want a command: build, verify or publish")
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:], stdout, stderr)
	case "verify":
		return verify(args[1:], stdout, stderr)
	case "publish":
		return publish(ctx, args[1:], stdout, stderr)
	}
	return fmt.Errorf("unknown command %q: want build, verify or publish", args[0])
}

// common are the flags of both commands.
type common struct {
	out, registry, tag string
	images             string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.out, "out", "build/images", "output directory: oci/<image>/ layouts, images.json, keys")
	fs.StringVar(&c.registry, "registry", "ghcr.io/taugrid", "registry the images are named under")
	fs.StringVar(&c.tag, "tag", "", "the images' tag: the chart's appVersion (required)")
	fs.StringVar(&c.images, "images", "tau-controller,tau-nodeagent,tau", "comma-separated images")
}

func (c *common) specs() ([]imagebuild.Spec, error) {
	if c.tag == "" || c.tag == "latest" {
		return nil, fmt.Errorf("--tag %q: want a version (the chart's appVersion)", c.tag)
	}
	var out []imagebuild.Spec
	for _, n := range strings.Split(c.images, ",") {
		s, err := imagebuild.SpecNamed(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func build(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := flag.NewFlagSet("images build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.register(fs)
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
	keyFile := fs.String("key", os.Getenv("TAU_IMAGE_SIGNING_KEY"), "ECDSA P-256 signing key (PEM; default $TAU_IMAGE_SIGNING_KEY, else a development key under --out)")
	allowDirty := fs.Bool("allow-dirty", false, "build a work tree with uncommitted changes (its images are labelled with HEAD all the same)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o, err := buildOptions(ctx, &c, *platforms, *allowDirty, stdout)
	if err != nil {
		return err
	}
	key, err := signingKey(*keyFile, c.out, stderr)
	if err != nil {
		return err
	}
	built, err := imagebuild.Build(ctx, o)
	if err != nil {
		return err
	}
	if err := imagebuild.Write(ctx, o, built, key); err != nil {
		return err
	}
	if err := imagebuild.WritePublicKey(filepath.Join(c.out, "signing.pub"), &key.PublicKey); err != nil {
		return err
	}
	for _, b := range built {
		fmt.Fprintf(stdout, "%s@%s  %s\n", b.Ref, b.Digest, imagebuild.LayoutDir(c.out, b.Spec.Name))
	}
	return nil
}

func buildOptions(ctx context.Context, c *common, platforms string, allowDirty bool, log io.Writer) (imagebuild.Options, error) {
	specs, err := c.specs()
	if err != nil {
		return imagebuild.Options{}, err
	}
	o := imagebuild.Options{Registry: c.registry, Tag: c.tag, Images: specs, Out: c.out, Work: imagebuild.WorkDir(c.out), Log: log}
	for _, p := range strings.Split(platforms, ",") {
		pl, err := imagebuild.ParsePlatform(strings.TrimSpace(p))
		if err != nil {
			return o, err
		}
		o.Platforms = append(o.Platforms, pl)
	}
	if o.Source, err = imagebuild.ReadSource(ctx, "."); err != nil {
		return o, err
	}
	if o.Source.Dirty && !allowDirty {
		return o, fmt.Errorf("the work tree has uncommitted changes, so its images would not be those of %.12s: commit them, or pass --allow-dirty", o.Source.Revision)
	}
	return o, nil
}

// signingKey is the release's key, or else the development key under out.
func signingKey(file, out string, stderr io.Writer) (*ecdsa.PrivateKey, error) {
	if file != "" {
		return imagebuild.LoadKey(file)
	}
	dev := filepath.Join(out, "development-signing.key")
	fmt.Fprintf(stderr, "images: no release key (--key or $TAU_IMAGE_SIGNING_KEY): signing with the development key %s\n", dev)
	return imagebuild.DevelopmentKey(dev)
}

func verify(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := flag.NewFlagSet("images verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.register(fs)
	pubFile := fs.String("public-key", "", "the release's public key (PEM; default <out>/signing.pub)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	specs, err := c.specs()
	if err != nil {
		return err
	}
	if *pubFile == "" {
		*pubFile = filepath.Join(c.out, "signing.pub")
	}
	pub, err := imagebuild.LoadPublicKey(*pubFile)
	if err != nil {
		return err
	}
	var failed []string
	for _, s := range specs {
		v, err := imagebuild.Verify(imagebuild.LayoutDir(c.out, s.Name), c.tag, pub)
		if err != nil {
			failed = append(failed, s.Name)
			fmt.Fprintf(stderr, "%s: %v\n", s.Name, err)
			continue
		}
		fmt.Fprintf(stdout, "%s@%s: signed; provenance: commit %.12s, %s, %d Go modules; SBOM: %d packages\n",
			v.Ref, v.Digest, v.Revision, v.GoVersion, v.Modules, v.Packages)
	}
	if len(failed) > 0 {
		return fmt.Errorf("not verified: %s", strings.Join(failed, ", "))
	}
	return nil
}

func publish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := flag.NewFlagSet("images publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.register(fs)
	chartDir := fs.String("chart", "charts/taugrid", "the chart to publish beside the images")
	chartVersion := fs.String("chart-version", "", "the published chart's version (default: the chart's own)")
	keyFile := fs.String("key", os.Getenv("TAU_IMAGE_SIGNING_KEY"), "the key the images were signed with, to sign the chart (default $TAU_IMAGE_SIGNING_KEY, else the development key under --out)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	specs, err := c.specs()
	if err != nil {
		return err
	}
	src, err := imagebuild.ReadSource(ctx, ".")
	if err != nil {
		return err
	}
	key, err := signingKey(*keyFile, c.out, stderr)
	if err != nil {
		return err
	}
	var pushed []imagebuild.Pushed
	for _, s := range specs {
		p, err := imagebuild.Push(ctx, c.out, c.registry, s.Name, c.tag)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pushed %s (signature, provenance and SBOM beside it)\n", p.Ref())
		pushed = append(pushed, p)
	}
	version := *chartVersion
	if version == "" {
		version = strings.TrimPrefix(c.tag, "v")
	}
	data, err := imagebuild.PackageChart(*chartDir, version, c.tag, pushed, src)
	if err != nil {
		return err
	}
	rel, err := imagebuild.PublishChart(ctx, c.registry, data, key, src)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pushed the chart %s --version %s (%s, %d bytes, signed)\n", rel.Ref, rel.Version, rel.Digest, rel.Bytes)
	return nil
}
