#!/usr/bin/env bash
# spark-merge on a Spark cluster (EMR, Dataproc, a standalone cluster), reading what `cdc ship --to s3` wrote.
# The same job module `cdc spark-merge` runs locally; on a cluster the executors read s3a:// directly.
#
# Needs: the cluster's Spark 3.5 with hadoop-aws matching its Hadoop (EMR and Dataproc ship it), and the state
# directory on storage the driver can reach (the driver writes merge.json, the lake pointer and the batches there;
# run in client mode on the machine that holds it, or point --state-dir/--target at a shared filesystem).
# Credentials: the cluster's instance role through the default provider chain; never keys on this command line.
set -euo pipefail

STATE_DIR=${STATE_DIR:-/var/lib/cdc/hr}
SOURCE=${SOURCE:-s3a://acme-cdc-landing/mysql/hr}
# The lake tables: a POSIX filesystem that the driver and every executor mount at the same path (EFS, NFS):
# a merge switches table versions with an atomic rename of a pointer file, which object stores do not have.
TARGET=${TARGET:-/mnt/shared/cdc/hr/lake}

# The cdc package (and its pure-Python dependencies the executors import) as one zip for --py-files.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip wheel --quiet --no-deps --wheel-dir "$work" .
(cd "$work" && unzip -q ./*.whl -d pkg && cd pkg && zip -qr ../cdc.zip cdc templates)

spark-submit \
  --master yarn --deploy-mode client \
  --py-files "$work/cdc.zip" \
  --conf spark.sql.session.timeZone=UTC \
  --conf spark.sql.shuffle.partitions=200 \
  --conf spark.hadoop.fs.s3a.aws.credentials.provider=com.amazonaws.auth.DefaultAWSCredentialsProviderChain \
  "$work/pkg/cdc/spark/job.py" \
  --state-dir "$STATE_DIR" --source "$SOURCE" --target "$TARGET"
# Prints the merge summary as JSON; exit codes as `cdc spark-merge` (0 ok, 5 unusable checkpoint, 1 failure).
