package config

import (
	"bytes"
	"text/template"
)

// initTemplate is the file `config init` writes: every key, its default
// and what it does. TestTemplateMatchesDefaults keeps it honest.
var initTemplate = template.Must(template.New("config").Parse(`# karpenter-migrate migration config for the {{.Environment}} environment.
# Commit it next to the generated Karpenter manifests; CI runs read it with
#   karpenter-migrate apply --config migrations/{{.Environment}}.yaml
# Unknown keys are errors, so a typo never silently falls back to a default.
apiVersion: karpenter-migrate.io/v1alpha1
kind: MigrationConfig
environment: {{.Environment}}
# EKS cluster name, AWS region and shared-config profile (empty: the SDK's defaults).
cluster: "{{.Cluster}}"
region: "{{.Region}}"
profile: ""

nodeGroups:
  # Legacy node groups to migrate; empty means every group Cluster Autoscaler manages.
  include: []
  # Groups to leave alone entirely (a kept controller group listed here is not resized or reserved).
  exclude: []

controller:
  # Legacy node group kept for the Karpenter controller: not zeroed, Cluster Autoscaler
  # tags removed, nodes reserved with CriticalAddonsOnly=true:NoSchedule and labelled
  # karpenter-migrate.io/karpenter-controller=true (the controller runs there only). Empty: plan takes
  # the live controller's required scheduling, else generate's Helm values; a Fargate
  # profile selecting the namespace means no group is kept.
  nodeGroup: ""
  # The kept group's final fixed size, spread over its zones (never below the replicas).
  size: 2
  # Namespace the controller runs in (or will be installed in).
  namespace: kube-system

generate:
  # single | multiple | weighted: one NodePool for all compatible groups, one per group,
  # or ordered pools (on-demand before spot).
  strategy: multiple
  # exact | family | similar: the instance types a NodePool may use.
  flexibility: exact
  # Keep eks.amazonaws.com/nodegroup=<name> on Karpenter nodes so pinned workloads still schedule.
  keepNodegroupLabel: true
  # Directory of the kustomize tree (base/ and overlays/<env>/).
  out: karpenter

rollout:
  # Legacy nodes per wave: a count (5) or a percentage of all legacy nodes (20%).
  waveSize: 20%
  # Nodes drained at the same time within a wave.
  concurrency: 2
  # Launch Karpenter capacity with placeholder pods before evicting anything.
  preProvision: true
  # Waves beyond the running one whose placeholders are created once its capacity is Ready,
  # so their nodes launch while it drains: each one more holds up to a wave's new capacity
  # longer (transient cost) and hides up to one more node launch (0: each wave launches as
  # it starts). Prepare every later wave (their count - 1) or none: 1 or 2 let evicted pods
  # wait for a node on the demo.
  prepareAhead: 0
  # Drain consecutive waves whose PodDisruptionBudgets do not overlap together: each one
  # pre-provisioned and cordoned, their nodes in one drain (concurrency at a time), behind one
  # gate. The first wave, and the first of each NodePool, still drains before any other.
  drainTogether: true
  # Evict pods with emptyDir volumes (their data is lost).
  allowEmptyDir: false
  # Evict pods marked karpenter.sh/do-not-disrupt or safe-to-evict=false.
  forceEvict: false
  # For the plan's predicted duration only: how long Karpenter takes from launching a node
  # to its being Ready, and how long an evicted pod's replacement takes to become Ready
  # (raise it to your workloads' start-up time: image pull, readiness probes).
  nodeLaunchTime: 1m0s
  podReadyTime: 5s

gates:
  # How long a wave waits for pre-provisioned nodes to become Ready.
  nodeReadyTimeout: 10m0s
  # The longest a rescheduled pod may stay Pending before the rollout pauses.
  podPendingTimeout: 5m0s
  # How long an eviction may wait on a PodDisruptionBudget before the rollout pauses.
  pdbWaitTimeout: 15m0s

maintenanceWindow:
  # Cron schedule (5 fields) of window starts, e.g. "0 22 * * 1-5"; empty means any time.
  schedule: ""
  # Length of each window, e.g. 4h.
  duration: 0s
  timeZone: UTC

readiness:
  # blocker | warning | never: which findings stop the run.
  failOn: blocker
  # Finding IDs reviewed and accepted (as the readiness command prints them), e.g. single-replica.
  acknowledge: []
`))

// InitFile renders a documented config file with every default spelled out.
func InitFile(env, cluster, region string) ([]byte, error) {
	var buf bytes.Buffer
	err := initTemplate.Execute(&buf, struct{ Environment, Cluster, Region string }{env, cluster, region})
	return buf.Bytes(), err
}
