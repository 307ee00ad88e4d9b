package testenv_test

import (
	"os"
	"testing"

	"github.com/karpenter-migrate/karpenter-migrate/internal/testenv"
)

// cluster is the control plane shared by this package's tests, with the
// Karpenter v1 CRDs installed; each test works in its own namespace and on
// its own kwok nodes.
var cluster = testenv.NewShared(testenv.Options{CRDDirs: []string{mustCRDDir("v1")}})

func TestMain(m *testing.M) { os.Exit(cluster.Run(m)) }

func mustCRDDir(name string) string {
	dir, err := testenv.CRDDir(name)
	if err != nil {
		panic(err)
	}
	return dir
}
