package imagebuild

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is what an image is built from: its layers, lowest first, and its runtime
// configuration.
type Image struct {
	Layers []*Layer
	Config v1.Config
}

// Build writes the layers as tar.gz blobs into dir (a scratch directory that must
// outlive the returned image: its layers are read from there) and returns the image:
// OS linux, architecture amd64, created at Epoch, one history entry per layer.
func Build(spec Image, dir string) (v1.Image, error) {
	cfg := &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Created:      v1.Time{Time: Epoch},
		Config:       spec.Config,
		RootFS:       v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	adds := make([]mutate.Addendum, 0, len(spec.Layers))
	for i, l := range spec.Layers {
		p := filepath.Join(dir, "layer-"+strconv.Itoa(i)+".tar.gz")
		if err := l.WriteTarGz(p); err != nil {
			return nil, fmt.Errorf("writing layer %d (%s): %w", i, l.Comment, err)
		}
		layer, err := tarball.LayerFromFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading layer %d (%s): %w", i, l.Comment, err)
		}
		adds = append(adds, mutate.Addendum{
			Layer:   layer,
			History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: l.Comment},
		})
	}
	return mutate.Append(img, adds...)
}

// WriteArchive writes img as a docker-save archive (manifest.json with RepoTags, the
// config and the layer blobs) tagged with every one of refs, to path atomically.
// `ctr images import` keeps the tags as the image names.
func WriteArchive(path string, img v1.Image, refs ...string) error {
	if len(refs) == 0 {
		return errors.New("an image archive needs at least one tag")
	}
	m := make(map[name.Reference]v1.Image, len(refs))
	for _, r := range refs {
		tag, err := name.NewTag(r, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("image tag %q: %w", r, err)
		}
		m[tag] = img
	}
	tmp := path + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, m); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing image archive %s: %w", path, err)
	}
	if err := sortRepoTags(tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing image archive %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// ArchiveManifest is one entry of a docker-save archive's manifest.json.
type ArchiveManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// sortRepoTags sorts each image's RepoTags in the archive's manifest.json, in place:
// go-containerregistry lists an image's tags in map order, and the archive's bytes
// should not depend on it. The sorted JSON has the same length, so only the entry's
// content changes.
func sortRepoTags(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return errors.New("no manifest.json in the archive")
		}
		if err != nil {
			return err
		}
		if h.Name != "manifest.json" {
			continue
		}
		// The reader has just read the header: the content starts here.
		off, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		var ms []map[string]json.RawMessage
		if err := json.Unmarshal(data, &ms); err != nil {
			return fmt.Errorf("decoding manifest.json: %w", err)
		}
		var tags []string
		for _, e := range ms {
			if err := json.Unmarshal(e["RepoTags"], &tags); err != nil {
				return fmt.Errorf("decoding manifest.json: %w", err)
			}
			sort.Strings(tags)
			if e["RepoTags"], err = json.Marshal(tags); err != nil {
				return err
			}
		}
		// Field order as go-containerregistry writes it.
		type entry struct {
			Config       json.RawMessage
			RepoTags     json.RawMessage
			Layers       json.RawMessage
			LayerSources json.RawMessage `json:",omitempty"`
		}
		out := make([]entry, len(ms))
		for i, e := range ms {
			out[i] = entry{e["Config"], e["RepoTags"], e["Layers"], e["LayerSources"]}
		}
		sorted, err := json.Marshal(out)
		if err != nil {
			return err
		}
		if len(sorted) != len(data) {
			return fmt.Errorf("manifest.json changed length when its tags were sorted (%d → %d bytes)", len(data), len(sorted))
		}
		if _, err := f.WriteAt(sorted, off); err != nil {
			return err
		}
		return f.Sync()
	}
}

// ReadArchiveManifest returns the manifest.json of the docker-save archive at path.
func ReadArchiveManifest(path string) ([]ArchiveManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no manifest.json: not a docker-save archive", path)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []ArchiveManifest
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			return nil, fmt.Errorf("decoding manifest.json of %s: %w", path, err)
		}
		return m, nil
	}
}
