package iam

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
)

// ReadJournal loads a journal written by WriteFile; a missing file is an
// empty journal for the cluster.
func ReadJournal(path, cluster string) (*Journal, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Journal{Cluster: cluster}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	var j Journal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("journal %s: %w (move it aside to start a new one)", path, err)
	}
	if j.Cluster != cluster {
		return nil, fmt.Errorf("journal %s is for cluster %q, not %q; pass --journal with another file", path, j.Cluster, cluster)
	}
	return &j, nil
}

// WriteFile stores the journal atomically.
func (j *Journal) WriteFile(path string) error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("render journal: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write journal %s: %w", path, err)
	}
	return nil
}
