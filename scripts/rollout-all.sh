#!/bin/sh
# rollout-all.sh ENV...: scripts/rollout.sh for each environment in order
# (e.g. dev staging prod), stopping at the first that does not finish.
#
# Each environment reads its own settings from migrations/ENV.yaml and, when
# present, migrations/ENV.env (see rollout.sh). Do not set PLAN_FILE or
# WORK_DIR for all of them at once: their defaults are per environment.
#
# Exit code: 0 when every environment is done, else the exit code of the
# environment that stopped (3 readiness, 4 paused, 5 drifted, 1 error,
# 2 usage); the environments after it are not started.

set -eu

if [ "$#" -eq 0 ]; then
	echo "usage: $0 ENV... (e.g. $0 dev staging prod)" >&2
	exit 2
fi

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)

for env in "$@"; do
	rc=0
	"$here/rollout.sh" "$env" || rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "rollout-all.sh: $env stopped with exit code $rc; not started: the environments after it" >&2
		exit "$rc"
	fi
done
echo "rollout-all.sh: done: $*" >&2
