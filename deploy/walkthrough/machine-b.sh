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
cat >> /var/lib/hypograph/dagster/dagster.yaml <<'EOF2'
compute_logs:
  module: dagster_aws.s3.compute_log_manager
  class: S3ComputeLogManager
  config:
    bucket: team-bucket
    prefix: hypograph/logs
EOF2
# from here on, B's own network: A's services by address only
NS="nsenter --net=/run/netns/$NS_B --"
$NS sh -c 'set -a; . /etc/hypograph/env; exec /opt/hypograph/.venv/bin/python -c "import boto3; boto3.client(\"s3\").create_bucket(Bucket=\"team-bucket\")"'
install -m 0644 '/opt/hypograph/deploy/systemd/hypograph-worker@.service' /etc/systemd/system/
# systemctl daemon-reload && systemctl enable --now hypograph-worker@1   (no systemd here: the unit's
# ExecStart with the unit's environment only, as its user, in its WorkingDirectory)
cd /opt/hypograph
$NS runuser -u hypograph -- env -i PATH=/opt/hypograph/.venv/bin:/usr/local/bin:/usr/bin:/bin \
  CELERY_WORKER_QUEUES=dagster,shards $(grep -v '^#' /etc/hypograph/env) \
  /opt/hypograph/.venv/bin/celery -A pipelines.celery_worker worker --pool solo -n hypograph-1@%h --loglevel INFO \
  > $W/worker.log 2>&1 &
WORKER_PID=$!
cd /
sleep 20
# --- the guide's check, as written
for k in 1 2 3 4 5 6; do
  $NS sh -c 'set -a; . /etc/hypograph/env; cd /opt/hypograph && exec .venv/bin/celery -A pipelines.celery_worker inspect ping' && break
  sleep 10
done
$NS sh -c 'set -a; . /etc/hypograph/env; cd /opt/hypograph && exec .venv/bin/celery -A pipelines.celery_worker inspect active_queues'
kill $WORKER_PID || true
