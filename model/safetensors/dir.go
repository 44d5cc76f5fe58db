package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// File names of a Hugging Face model folder.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
)

// ShardName is transformers' name for shard k (1-based) of n.
func ShardName(k, n int) string {
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", k, n)
}

// Dir is the weights of one model folder: model.safetensors, or the shards
// listed by model.safetensors.index.json. Like transformers, it prefers the
// single file when both are present.
type Dir struct {
	Path   string
	Files  []*File          // one per shard, in index order
	byName map[string]*File // tensor -> the shard holding it
}

// OpenDir opens the weights of the folder dir. For a sharded folder it
// validates the index: it is JSON with a weight_map of tensor -> shard file
// name, each named shard exists and is a valid file, every tensor lies in
// the shard the index names, and no shard holds a tensor the index omits.
func OpenDir(dir string) (*Dir, error) {
	single := filepath.Join(dir, SingleFile)
	if _, err := os.Stat(single); err == nil {
		f, err := Open(single)
		if err != nil {
			return nil, err
		}
		d := &Dir{Path: dir, Files: []*File{f}, byName: map[string]*File{}}
		for _, t := range f.Header.Tensors {
			d.byName[t.Name] = f
		}
		return d, nil
	}
	indexPath := filepath.Join(dir, IndexFile)
	raw, err := os.ReadFile(indexPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: %s: neither %s nor %s found", dir, SingleFile, IndexFile)
	}
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	weightMap, err := parseIndex(raw, indexPath)
	if err != nil {
		return nil, err
	}
	d := &Dir{Path: dir, byName: map[string]*File{}}
	shards := map[string]*File{}
	names := make([]string, 0, len(weightMap))
	for name := range weightMap {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		shard := weightMap[name]
		f, ok := shards[shard]
		if !ok {
			f, err = Open(filepath.Join(dir, shard))
			if err != nil {
				d.Close()
				if errors.Is(err, fs.ErrNotExist) {
					return nil, newError(indexPath, name, ErrIndex, "shard %s is missing", shard)
				}
				return nil, err
			}
			shards[shard] = f
			d.Files = append(d.Files, f)
		}
		if _, ok := f.Info(name); !ok {
			d.Close()
			return nil, newError(indexPath, name, ErrIndex, "index names shard %s, which does not hold it", shard)
		}
		d.byName[name] = f
	}
	sort.Slice(d.Files, func(i, j int) bool { return d.Files[i].Path < d.Files[j].Path })
	for _, f := range d.Files {
		for _, t := range f.Header.Tensors {
			if d.byName[t.Name] != f {
				d.Close()
				return nil, newError(f.Path, t.Name, ErrIndex, "shard holds a tensor that %s does not map to it", IndexFile)
			}
		}
	}
	return d, nil
}

// parseIndex returns the weight_map of an index file, rejecting duplicate
// keys, non-string entries and shard names that leave the folder.
func parseIndex(raw []byte, path string) (map[string]string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, newError(path, "", ErrIndex, "%v", err)
	}
	wm, ok := top["weight_map"]
	if !ok {
		return nil, newError(path, "", ErrIndex, "no weight_map")
	}
	dec := json.NewDecoder(bytes.NewReader(wm))
	if err := expectDelim(dec, '{'); err != nil {
		return nil, newError(path, "", ErrIndex, "weight_map: %v", err)
	}
	out := map[string]string{}
	for dec.More() {
		name, err := readString(dec)
		if err != nil {
			return nil, newError(path, "", ErrIndex, "weight_map: %v", err)
		}
		shard, err := readString(dec)
		if err != nil {
			return nil, newError(path, name, ErrIndex, "weight_map value: %v", err)
		}
		if _, dup := out[name]; dup {
			return nil, newError(path, name, ErrDuplicate, "weight_map lists it twice")
		}
		if shard == "" || strings.ContainsAny(shard, `/\`) || shard == "." || shard == ".." {
			return nil, newError(path, name, ErrIndex, "shard name %q is not a file in the folder", shard)
		}
		out[name] = shard
	}
	return out, nil
}

// Close closes every shard.
func (d *Dir) Close() error {
	var first error
	for _, f := range d.Files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Names lists every tensor name, sorted.
func (d *Dir) Names() []string {
	names := make([]string, 0, len(d.byName))
	for n := range d.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Info describes the tensor called name.
func (d *Dir) Info(name string) (Info, bool) {
	f, ok := d.byName[name]
	if !ok {
		return Info{}, false
	}
	return f.Info(name)
}

// FileOf is the shard holding name.
func (d *Dir) FileOf(name string) (*File, bool) {
	f, ok := d.byName[name]
	return f, ok
}

// ReadF32 converts the tensor called name into dst (see File.ReadF32).
func (d *Dir) ReadF32(name string, dst []float32) error {
	f, ok := d.byName[name]
	if !ok {
		return newError(d.Path, name, ErrNotFound, "")
	}
	return f.ReadF32(name, dst)
}

// Bytes returns the raw bytes of a tensor (see File.Bytes).
func (d *Dir) Bytes(name string) ([]byte, error) {
	f, ok := d.byName[name]
	if !ok {
		return nil, newError(d.Path, name, ErrNotFound, "")
	}
	return f.Bytes(name)
}

// WriteDir writes tensors into the existing folder dir as transformers'
// save_pretrained does: one model.safetensors when they fit in
// maxShardBytes, otherwise shards filled in the given order (a tensor
// larger than the limit gets a shard of its own) plus an index whose
// metadata.total_size counts tensor bytes only. Every file carries meta as
// __metadata__. It returns the names of the files written.
func WriteDir(dir string, tensors []Tensor, meta map[string]string, maxShardBytes int64) ([]string, error) {
	if maxShardBytes <= 0 {
		return nil, fmt.Errorf("safetensors: shard size limit %d must be positive", maxShardBytes)
	}
	var shards [][]Tensor
	var cur []Tensor
	var curBytes, total int64
	seen := map[string]bool{}
	for i := range tensors {
		n, err := tensors[i].byteLen()
		if err != nil {
			return nil, err
		}
		if seen[tensors[i].Name] {
			return nil, newError("", tensors[i].Name, ErrDuplicate, "two tensors with this name")
		}
		seen[tensors[i].Name] = true
		if len(cur) > 0 && curBytes+n > maxShardBytes {
			shards = append(shards, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, tensors[i])
		curBytes += n
		total += n
	}
	shards = append(shards, cur)
	if len(shards) == 1 {
		return []string{SingleFile}, WriteFile(filepath.Join(dir, SingleFile), tensors, meta)
	}
	weightMap := map[string]string{}
	var files []string
	for k, shard := range shards {
		name := ShardName(k+1, len(shards))
		if err := WriteFile(filepath.Join(dir, name), shard, meta); err != nil {
			return nil, err
		}
		for _, t := range shard {
			weightMap[t.Name] = name
		}
		files = append(files, name)
	}
	index := struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": total}, weightMap}
	raw, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	raw = append(raw, '\n')
	if err := writeSynced(filepath.Join(dir, IndexFile), raw); err != nil {
		return nil, err
	}
	return append(files, IndexFile), nil
}

// writeSynced writes a small file and syncs it before returning.
func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	return f.Close()
}

// Mapped says whether name's bytes alias a memory-mapped file (rather
// than a copy read into the heap), so that a reader may release its pages.
func (d *Dir) Mapped(name string) bool {
	f, ok := d.byName[name]
	return ok && f.mapped
}
