#!/bin/bash
# Machine B of the walk (a worker on a second host, no input folder), in a private mount namespace
# whose /etc is a copy; the install runs with the host's network (the package index), the worker in
# B's network namespace, which reaches A's services only by address.
set -euxo pipefail
W=$WALK/b
mount --bind $W/etc /etc
for d in /opt/hypograph /var/lib/hypograph; do mkdir -p $W$d; mount --bind $W$d $d; done
# --- the guide, "Install once on each machine", as written
apt-get install -y python3.11 python3.11-venv git
git clone "$HYPOGRAPH_REPO" /opt/hypograph
python3.11 -m venv /opt/hypograph/.venv
time /opt/hypograph/.venv/bin/pip install '/opt/hypograph[celery,s3]'
useradd --system --home /var/lib/hypograph hypograph
install -d -o hypograph -g hypograph -m 0750 /var/lib/hypograph /var/lib/hypograph/dagster
install -m 0644 /opt/hypograph/deploy/dagster.yaml /var/lib/hypograph/dagster/dagster.yaml
install -d -m 0755 /etc/hypograph
install -m 0600 /dev/null /etc/hypograph/env
# the guide's three ini blocks, with this walk's values (what the engineer types in)
. $WALK/redis.env.for-b
cat > /etc/hypograph/env <<ENV
# /etc/hypograph/env
DAGSTER_HOME=/var/lib/hypograph/dagster
DAGSTER_PG_HOST=$ADDR_A
DAGSTER_PG_PORT=5432
DAGSTER_PG_USER=hypograph
DAGSTER_PG_PASSWORD=$PGPW
DAGSTER_PG_DB=hypograph
# the folder whose sub-folders the inputs_discovered sensor registers
HYPOGRAPH_WORKSPACE=/srv/hypograph/inputs
HYPOGRAPH_EXECUTOR=celery
HYPOGRAPH_CELERY_CONFIG=/opt/hypograph/deploy/celery.yaml
HYPOGRAPH_CELERY_BROKER=redis://:$HYPOGRAPH_REDIS_PASSWORD@$ADDR_A:6379/0
HYPOGRAPH_SHARD_STORAGE=s3://team-bucket/hypograph/shards
AWS_ACCESS_KEY_ID=walk-key
AWS_SECRET_ACCESS_KEY=walk-secret
AWS_DEFAULT_REGION=us-east-1
# an S3-compatible store other than AWS (MinIO, Ceph...):
AWS_ENDPOINT_URL=http://$ADDR_A:9000
# this machine has no input folder: only the range steps
CELERY_WORKER_QUEUES=shards
ENV
ls -l /etc/hypograph/env
[ "$(stat -c %a:%U /etc/hypograph/env)" = 600:root ]
cat >> /var/lib/hypograph/dagster/dagster.yaml <<'EOF'
compute_logs:
  module: dagster_aws.s3.compute_log_manager
  class: S3ComputeLogManager
  config:
    bucket: team-bucket
    prefix: hypograph/logs
    # where a step's or a sensor's output waits for its upload (Dagster's default: /tmp, every user's)
    local_dir: /var/lib/hypograph/dagster/compute_logs
EOF
# from here on, B's own network: A's services by address only
NS="nsenter --net=/run/netns/$NS_B --"
# What `systemctl start UNIT` runs, without systemd: the unit file's ExecStart (`\` lines joined, %i
# and %% expanded) with nothing but the unit's Environment= and EnvironmentFile= (the file's values
# last: they win), as its User=, with its UMask=, in its WorkingDirectory=, in B's network.
start_unit() {  # UNIT-FILE INSTANCE LOG
  local words
  mapfile -t words < <(python3 - "$1" "$2" <<'PY'
import re, shlex, sys
text = re.sub(r"\\\n\s*", " ", open(sys.argv[1]).read())
unit = {}
for line in text.splitlines():
    if "=" in line and not line.lstrip().startswith(("#", ";")):
        key, _, value = line.partition("=")
        unit.setdefault(key.strip(), []).append(value.strip())
env = [pair for value in unit.get("Environment", []) for pair in shlex.split(value)]
for name in unit.get("EnvironmentFile", []):
    lines = [line.strip() for line in open(name.lstrip("-"))]
    env += [line for line in lines if line and not line.startswith(("#", ";"))]
command = unit["ExecStart"][-1].replace("%%", "\0").replace("%i", sys.argv[2]).replace("\0", "%")
print(unit["User"][0], unit.get("UMask", ["0022"])[0], unit.get("WorkingDirectory", ["/"])[0], sep="\n")
print(*["env", "-i", *env, *shlex.split(command)], sep="\n")
PY
  )
  (cd "${words[2]}" && umask "${words[1]}" && exec $NS runuser -u "${words[0]}" -- "${words[@]:3}") > "$3" 2>&1 &
}
$NS sh -c 'set -a; . /etc/hypograph/env; exec /opt/hypograph/.venv/bin/python -c "import boto3; boto3.client(\"s3\").create_bucket(Bucket=\"team-bucket\")"'
install -m 0644 '/opt/hypograph/deploy/systemd/hypograph-worker@.service' /etc/systemd/system/
# systemctl daemon-reload && systemctl enable --now hypograph-worker@1   (no systemd here:)
start_unit '/etc/systemd/system/hypograph-worker@.service' 1 $W/worker.log
WORKER_PID=$!
# --- the guide's check, as written; the walk fails unless hypograph-1 answers and serves `shards` alone
for k in $(seq 18); do
  if ping=$($NS sh -c 'set -a; . /etc/hypograph/env; cd /opt/hypograph && exec .venv/bin/celery -A pipelines.celery_worker inspect ping' 2>&1); then break; fi
  sleep 10
done
echo "$ping"
grep -Eq -- '-> +hypograph-1@[^:]+: OK' <<<"$ping"
grep -q pong <<<"$ping"
queues=$($NS sh -c 'set -a; . /etc/hypograph/env; cd /opt/hypograph && exec .venv/bin/celery -A pipelines.celery_worker inspect active_queues' 2>&1)
echo "$queues"
[ "$(grep -Eo "^ +\* \{'name': '[^']*'" <<<"$queues" | sed 's/.*: //')" = "'shards'" ]  # the queues, not their exchange
# --- the guide's daemon and web server units: in a team on the machine with the inputs; here on B, to
# see them start as written against A's database (its tables made on first use). The daemon's unit
# is the guide's ini block, written where its first line says; the web server's is "the same unit
# with" the guide's ExecStart.
python3 - <<'PY'
import re
guide = open("/opt/hypograph/deploy/README-deployment.md", encoding="utf-8").read()
name = "# /etc/systemd/system/hypograph-daemon.service\n"
(unit,) = [b for b in re.findall(r"```ini\n(.*?)```", guide, re.S) if b.startswith(name)]
open(name[2:-1], "w").write(unit)
PY
sed 's|^ExecStart=.*|ExecStart=/opt/hypograph/.venv/bin/dagster-webserver -w /opt/hypograph/workspace.yaml -h 127.0.0.1 -p 3000|' \
  /etc/systemd/system/hypograph-daemon.service > /etc/systemd/system/hypograph-webserver.service
# systemctl enable --now hypograph-daemon hypograph-webserver   (no systemd here:)
start_unit /etc/systemd/system/hypograph-daemon.service "" $W/daemon.log
DAEMON_PID=$!
start_unit /etc/systemd/system/hypograph-webserver.service "" $W/webserver.log
WEB_PID=$!
for k in $(seq 30); do
  $NS curl -sf http://127.0.0.1:3000/server_info && break
  sleep 10
done
$NS curl -sf http://127.0.0.1:3000/server_info
for k in $(seq 18); do
  $NS sh -c 'set -a; . /etc/hypograph/env; cd /opt/hypograph && exec .venv/bin/dagster-daemon liveness-check' && break
  sleep 10
done
$NS sh -c 'set -a; . /etc/hypograph/env; cd /opt/hypograph && exec .venv/bin/dagster-daemon liveness-check'
# a sensor's tick writes its output through the compute log manager, into local_dir first
for k in $(seq 12); do [ -d /var/lib/hypograph/dagster/compute_logs ] && break; sleep 5; done
ls -lR /var/lib/hypograph/dagster/compute_logs
if grep -E "Traceback|Exception|Error" $W/daemon.log $W/webserver.log; then exit 1; fi
kill $WORKER_PID $DAEMON_PID $WEB_PID || true
