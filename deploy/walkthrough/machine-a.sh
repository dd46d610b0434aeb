#!/bin/bash
# Machine A of the walk (database, Redis, an S3 stand-in), inside its own network namespace and a
# private mount namespace whose /etc is a copy (so useradd, /etc/postgresql, /etc/redis are its own).
set -euxo pipefail
W=$WALK/a
mount --bind $W/etc /etc
for d in /var/lib/postgresql /var/log/postgresql /var/run/postgresql /var/lib/redis /opt/hypograph; do
  mkdir -p $W$d; mount --bind $W$d $d
done
chown postgres:postgres /var/lib/postgresql /var/log/postgresql /var/run/postgresql
chown redis:redis /var/lib/redis
ip link set lo up || true
# --- what `apt-get install -y postgresql` does on a fresh machine (here it is installed already)
apt-get install -y postgresql
pg_createcluster 15 main
pg_ctlcluster 15 main start
# --- the guide, "The database", as written (the password fed to the prompt; LAN address: A's)
(sleep 3; echo "$PGPW"; sleep 3; echo "$PGPW"; sleep 5) | script -qec 'runuser -u postgres -- createuser --pwprompt hypograph' /dev/null
runuser -u postgres -- createdb --owner hypograph hypograph
echo "listen_addresses = 'localhost,$ADDR_A'" > /etc/postgresql/15/main/conf.d/hypograph.conf
echo "host hypograph hypograph $SUBNET scram-sha-256" >> /etc/postgresql/15/main/pg_hba.conf
# systemctl restart postgresql   (no systemd here:)
pg_ctlcluster 15 main restart
# --- the guide, "Install once on each machine" (the parts this machine needs: the recipe's files)
git clone "$HYPOGRAPH_REPO" /opt/hypograph
# --- the guide, "Redis", as written
apt-get install -y redis-server
install -m 0644 /opt/hypograph/deploy/systemd/redis-hypograph.conf /etc/redis/hypograph.conf
install -d /etc/systemd/system/redis-server.service.d
install -m 0644 /opt/hypograph/deploy/systemd/redis-server.service.d/hypograph.conf /etc/systemd/system/redis-server.service.d/
install -d -m 0755 /etc/hypograph
( umask 077; printf 'HYPOGRAPH_REDIS_PASSWORD=%s\n' "$(openssl rand -hex 24)" > /etc/hypograph/redis.env )
sed -i "s/^bind .*/bind 127.0.0.1 $ADDR_A/" /etc/redis/hypograph.conf
# systemctl daemon-reload && systemctl restart redis-server   (no systemd here: the drop-in's ExecStart,
# as the redis user, with its EnvironmentFile)
set -a; . /etc/hypograph/redis.env; set +a
runuser -u redis -- /bin/sh -c 'printf "requirepass %s\n" "$HYPOGRAPH_REDIS_PASSWORD" | exec /usr/bin/redis-server /etc/redis/hypograph.conf --supervised systemd --daemonize no -' > $W/redis.log 2>&1 &
REDIS_PID=$!
cp /etc/hypograph/redis.env $WALK/redis.env.for-b   # what the team copies into B's env by hand
# --- the object store: the team's S3 or MinIO; here moto_server, the tests' emulator
"$MOTO_SERVER" -H "$ADDR_A" -p 9000 > $W/s3.log 2>&1 &
S3_PID=$!
touch $WALK/a.ready
while [ ! -e $WALK/a.stop ]; do sleep 2; done
pg_ctlcluster 15 main stop || true
kill $REDIS_PID $S3_PID || true
