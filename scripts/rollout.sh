#!/bin/sh
# rollout.sh ENV: the scripted migration of one environment, for CI.
#
#   discover -> readiness --fail-on blocker -> generate (the repo's overlay for ENV)
#   -> plan -> apply --yes
#
# POSIX sh (set -eu); no bashisms. Every setting is an environment variable:
#
#   CLUSTER       EKS cluster name (default: "cluster" of the migration config)
#   AWS_REGION    AWS region (default: the config's "region", then the SDK's)
#   AWS_PROFILE   AWS shared-config profile (default: the config's "profile")
#   KUBECONFIG    kubeconfig file(s), as kubectl reads them
#   KUBE_CONTEXT  kubeconfig context (default: the current one)
#   ENDPOINT_URL  send every AWS call there (VPC endpoints, tests)
#   CONFIG        migration config (default migrations/ENV.yaml, used when present)
#   TREE_DIR      the repo's generated kustomize tree (default karpenter); ENV's
#                 overlay is TREE_DIR/overlays/ENV
#   WORK_DIR      snapshot, plan and journal of this run (default .karpenter-migrate/ENV)
#   PLAN_FILE     the plan (default WORK_DIR/plan.yaml)
#   PHASE         all (default) | plan (stop after writing the plan, for review)
#                 | apply (apply PLAN_FILE as reviewed; the cluster must not have
#                 changed since, or the run exits 5)
#   DRY_RUN=1     apply --dry-run: print what would change, change nothing
#   FAIL_ON       readiness threshold: blocker (default) or warning
#   SKIP_IAM=1    plan without the IAM steps (02..06): IAM is managed elsewhere
#   SKIP_KARPENTER=1  plan without step 07: Karpenter is installed elsewhere (GitOps)
#   KARPENTER_CHART   chart step 07 installs: a local chart directory or tarball, or a
#                 URL (plan --karpenter-chart; default: the official OCI chart)
#   NAMESPACE     the tool's namespace for journal and lock (default karpenter-migrate)
#   LOG_FORMAT    text (default) or json: one JSON object per line on stderr for
#                 each step of this script and each run/step/wave/eviction/gate event
#   KM_BIN        the karpenter-migrate binary (default: karpenter-migrate on PATH)
#
# When migrations/ENV.env exists it is sourced first (trusted shell: VAR=value
# lines such as KUBECONFIG, KUBE_CONTEXT, AWS_PROFILE, CLUSTER), so that
# rollout-all.sh can reach each environment's own cluster.
#
# Exit codes: 0 done (or the plan written, with PHASE=plan), 1 error,
# 2 usage, 3 blocked by readiness, 4 a gate failed or the rollout paused
# (fix, then run again: it resumes), 5 the cluster drifted since the plan.

set -eu

EXIT_ERROR=1
EXIT_USAGE=2
EXIT_READINESS=3
EXIT_PAUSED=4
EXIT_DRIFTED=5

usage() {
	echo "usage: $0 ENV   (see the comment at the top of this script for the variables it reads)" >&2
	exit "$EXIT_USAGE"
}

[ "$#" -eq 1 ] || usage
ENV=$1
case $ENV in
'' | -* | *[!a-z0-9-]*)
	echo "$0: environment \"$ENV\": want lower-case letters, digits and dashes (dev, staging, prod)" >&2
	exit "$EXIT_USAGE"
	;;
esac

ENV_FILE=${ENV_FILE:-migrations/$ENV.env}
if [ -f "$ENV_FILE" ]; then
	set -a
	# shellcheck source=/dev/null
	. "./${ENV_FILE#./}"
	set +a
fi

KM_BIN=${KM_BIN:-karpenter-migrate}
LOG_FORMAT=${LOG_FORMAT:-text}
NAMESPACE=${NAMESPACE:-karpenter-migrate}
TREE_DIR=${TREE_DIR:-karpenter}
WORK_DIR=${WORK_DIR:-.karpenter-migrate/$ENV}
PLAN_FILE=${PLAN_FILE:-$WORK_DIR/plan.yaml}
SNAPSHOT=$WORK_DIR/snapshot.json
PHASE=${PHASE:-all}
DRY_RUN=${DRY_RUN:-0}
FAIL_ON=${FAIL_ON:-blocker}
SKIP_IAM=${SKIP_IAM:-0}
SKIP_KARPENTER=${SKIP_KARPENTER:-0}
KARPENTER_CHART=${KARPENTER_CHART:-}
CLUSTER=${CLUSTER:-}
AWS_REGION=${AWS_REGION:-}
AWS_PROFILE=${AWS_PROFILE:-}
ENDPOINT_URL=${ENDPOINT_URL:-}
KUBE_CONTEXT=${KUBE_CONTEXT:-}

# say MESSAGE: a line on stderr, JSON with LOG_FORMAT=json (the messages
# are fixed text and a validated environment name: nothing to escape).
say() {
	if [ "$LOG_FORMAT" = json ]; then
		printf '{"time":"%s","level":"INFO","msg":"%s","event":"Script","env":"%s"}\n' \
			"$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" "$ENV" >&2
	else
		printf '%s rollout.sh %s: %s\n' "$(date -u +%H:%M:%S)" "$ENV" "$1" >&2
	fi
}

fail() {
	say "$2"
	exit "$1"
}

case $LOG_FORMAT in text | json) ;; *) fail "$EXIT_USAGE" "LOG_FORMAT=$LOG_FORMAT: want text or json" ;; esac
case $PHASE in all | plan | apply) ;; *) fail "$EXIT_USAGE" "PHASE=$PHASE: want all, plan or apply" ;; esac
case $DRY_RUN in 0 | 1) ;; *) fail "$EXIT_USAGE" "DRY_RUN=$DRY_RUN: want 0 or 1" ;; esac
case $FAIL_ON in blocker | warning) ;; *) fail "$EXIT_USAGE" "FAIL_ON=$FAIL_ON: want blocker or warning" ;; esac
case $SKIP_IAM in 0) skip_iam= ;; 1) skip_iam=--skip-iam ;; *) fail "$EXIT_USAGE" "SKIP_IAM=$SKIP_IAM: want 0 or 1" ;; esac
case $SKIP_KARPENTER in 0) skip_karpenter= ;; 1) skip_karpenter=--skip-karpenter ;; *) fail "$EXIT_USAGE" "SKIP_KARPENTER=$SKIP_KARPENTER: want 0 or 1" ;; esac
command -v "$KM_BIN" >/dev/null 2>&1 || fail "$EXIT_USAGE" "KM_BIN=$KM_BIN: not found; install karpenter-migrate or point KM_BIN at it"

if [ -n "${CONFIG:-}" ]; then
	[ -f "$CONFIG" ] || fail "$EXIT_USAGE" "CONFIG=$CONFIG: no such file"
elif [ -f "migrations/$ENV.yaml" ]; then
	CONFIG=migrations/$ENV.yaml
else
	CONFIG=
fi
if [ -z "$CLUSTER" ] && [ -z "$CONFIG" ] && [ "$PHASE" != apply ]; then
	fail "$EXIT_USAGE" "set CLUSTER, or write migrations/$ENV.yaml with karpenter-migrate config init $ENV --cluster NAME"
fi

# km ARGS...: the binary with the flags every command shares. KUBECONFIG,
# AWS_REGION and AWS_PROFILE are also read from the environment by
# client-go and the AWS SDK; they are passed explicitly where they are set.
km() {
	"$KM_BIN" "$@" --namespace "$NAMESPACE" --log-format "$LOG_FORMAT" \
		${AWS_REGION:+--region "$AWS_REGION"} \
		${AWS_PROFILE:+--profile "$AWS_PROFILE"} \
		${ENDPOINT_URL:+--endpoint-url "$ENDPOINT_URL"} \
		${KUBE_CONTEXT:+--context "$KUBE_CONTEXT"}
}

# step NAME CODE-MAP ARGS...: run one command; its exit code is mapped to
# this script's: the codes the command may legitimately return pass
# through, anything else is an error.
step() {
	name=$1 pass=$2
	shift 2
	say "step $name"
	rc=0
	km "$@" || rc=$?
	[ "$rc" -eq 0 ] && return 0
	case " $pass " in
	*" $rc "*) ;;
	*) fail "$EXIT_ERROR" "step $name failed (exit $rc)" ;;
	esac
	case $rc in
	"$EXIT_READINESS") fail "$rc" "blocked by readiness: fix the findings above, then run again" ;;
	"$EXIT_PAUSED") fail "$rc" "paused: a gate failed, a wait timed out or it is outside the maintenance window; see karpenter-migrate status --env $ENV, fix, and run again to resume" ;;
	"$EXIT_DRIFTED") fail "$rc" "the cluster changed since the plan: review a new plan (PHASE=plan), then apply it" ;;
	esac
	fail "$rc" "step $name exited $rc"
}

mkdir -p "$WORK_DIR" "$(dirname "$PLAN_FILE")"

if [ "$PHASE" != apply ]; then
	step discover "" discover ${CLUSTER:+--cluster "$CLUSTER"} ${CONFIG:+--config "$CONFIG"} --snapshot "$SNAPSHOT" -o json >"$WORK_DIR/discover.json"
	step readiness "$EXIT_READINESS" readiness --snapshot "$SNAPSHOT" --fail-on "$FAIL_ON" ${CONFIG:+--config "$CONFIG"}
	step generate "" generate --snapshot "$SNAPSHOT" --out "$TREE_DIR" --envs "$ENV" ${CONFIG:+--config "$CONFIG"}
	step plan "" plan --env "$ENV" --snapshot "$SNAPSHOT" --dir "$TREE_DIR" -f "$PLAN_FILE" ${CONFIG:+--config "$CONFIG"} $skip_iam $skip_karpenter ${KARPENTER_CHART:+--karpenter-chart "$KARPENTER_CHART"}
	if [ "$PHASE" = plan ]; then
		say "plan written to $PLAN_FILE and overlay $TREE_DIR/overlays/$ENV: review them (the plan's controller section says which group is kept for the Karpenter controller), then run with PHASE=apply"
		exit 0
	fi
fi

[ -f "$PLAN_FILE" ] || fail "$EXIT_USAGE" "PLAN_FILE=$PLAN_FILE: no such file; run with PHASE=plan first"
if [ "$DRY_RUN" = 1 ]; then
	step apply "" apply --plan "$PLAN_FILE" --dir "$TREE_DIR" --dry-run ${CONFIG:+--config "$CONFIG"}
	say "dry run done: nothing was changed"
	exit 0
fi

rc=0
(step apply "$EXIT_PAUSED $EXIT_DRIFTED" apply --plan "$PLAN_FILE" --dir "$TREE_DIR" --yes ${CONFIG:+--config "$CONFIG"}) || rc=$?
# The journal, for the pipeline's artifacts, whatever the outcome.
km status --env "$ENV" -o json >"$WORK_DIR/journal.json" 2>/dev/null || rm -f "$WORK_DIR/journal.json"
[ "$rc" -eq 0 ] || exit "$rc"
say "done: $ENV migrated; journal in $WORK_DIR/journal.json"
