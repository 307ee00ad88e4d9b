// Command karpenter-migrate moves EKS clusters from Cluster Autoscaler node
// groups to Karpenter NodePools: planned, previewed, reversible.
package main

import (
	"os"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/cli"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/iostreams"
)

func main() {
	os.Exit(cli.Execute(iostreams.System()))
}
