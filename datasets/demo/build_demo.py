#!/usr/bin/env python3
"""Build the bundled ``demo`` dataset for ragbench.

This script is the single source of truth for the dataset. It holds the
documentation of "Nimbus", a fictional distributed job-queue and object
storage service, plus the evaluation queries, and writes:

    corpus.jsonl, queries.jsonl, qrels/test.tsv, spans/test.jsonl, README.md

into the directory that contains this script. Evidence spans are written
below as exact quoted substrings of the document text; the script finds them
with ``str.find`` and derives character offsets. Output is deterministic, so
re-running the script reproduces every file byte-for-byte.

Usage:
    python3 datasets/demo/build_demo.py

Only the Python standard library is used. All content is synthetic and was
written for this project (MIT licensed, like the rest of ragbench).
"""

import json
import os
from collections import Counter, OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))

DOC_TYPES = {"reference", "guide", "release-notes", "api", "troubleshooting"}
QUERY_CLASSES = ("identifier", "paraphrase", "cross-section", "unanswerable")
MIN_WORDS, MAX_WORDS = 250, 900
MIN_SPAN, MAX_SPAN = 60, 600

DOCS = []
QUERIES = []


def add_doc(doc_id, title, doc_type, product_area, date, tenant, text):
    DOCS.append(
        {
            "_id": doc_id,
            "title": title,
            "text": text.strip("\n") + "\n",
            "metadata": {
                "doc_type": doc_type,
                "product_area": product_area,
                "date": date,
                "tenant": tenant,
            },
        }
    )


def add_query(qid, cls, text, answers=(), rels=()):
    """rels: list of (doc_id, relevance, [evidence, ...]).

    Each evidence item is either an exact substring of the document text
    (which must occur exactly once) or a tuple ``(substring, occurrence)``
    selecting the n-th (0-based) occurrence.
    """
    QUERIES.append(
        {"_id": qid, "class": cls, "text": text, "answers": list(answers), "rels": list(rels)}
    )


# ---------------------------------------------------------------------------
# Documents
# ---------------------------------------------------------------------------

add_doc("nimbus-overview", "Getting Started with Nimbus", "guide", "general", "2024-01-15", "public", """
Nimbus is a distributed service that combines a durable job queue with a replicated object store. Teams use it to hand work off between services, schedule background processing, and keep the artifacts those jobs produce in one place. This page introduces the main components and the vocabulary used throughout the rest of the documentation.

## Core concepts

### Queues and jobs

A queue is a named, ordered channel that holds jobs. A job is a small message (by default at most 1 MiB) plus metadata such as priority, attempt count and an optional deduplication key. Producers enqueue jobs; workers lease them, process them, and acknowledge them. A job that is not acknowledged before its lease runs out becomes visible again and is offered to another worker.

### Workers

A worker is any process that connects to a broker and asks for jobs from one or more queues. Workers send heartbeats so the scheduler knows they are alive. Workers can be written in any language that speaks the HTTP API, and official client libraries exist for Python, Go and Java.

### Objects and buckets

Large inputs and outputs do not belong in job payloads. Instead, store them as objects in a bucket and pass the object key in the job. Objects are replicated across storage nodes and can be protected by retention policies.

### Tenants

Every queue, bucket and token belongs to exactly one tenant. Tenants are the unit of isolation and quota enforcement. A single Nimbus cluster usually hosts many tenants.

## Architecture

A cluster has three kinds of processes:

- **Brokers** accept API requests, authenticate callers, and route jobs to the right partitions.
- **The scheduler** tracks workers, assigns queue partitions, and decides where work should run.
- **Storage nodes** persist queue partitions and objects on local disks or an S3-compatible backend.

All three are shipped in the single `nimbusd` binary and selected with the `--role` flag. Small installations often run every role on each machine; larger ones separate them.

## Where to go next

- Follow the Linux or Kubernetes installation guide to get a cluster running.
- Read the configuration references for queue, storage and scheduler settings.
- Look up any `NMB-` error code in the error reference pages.
- Check the release notes before upgrading.
""")

add_doc("nimbus-install-linux", "Installing Nimbus on Linux", "guide", "installation", "2024-02-01", "public", """
This guide installs a three-node Nimbus cluster on Linux hosts using the packaged binaries. It assumes systemd and a recent x86_64 or arm64 distribution. Nimbus does not support Windows or macOS as server platforms; those systems are supported only for the `nimbusctl` command-line client.

## Requirements

- Three hosts with at least 4 CPU cores, 8 GiB of memory and a dedicated data disk each.
- TCP ports 7400 (client API), 7401 (cluster gossip) and 7402 (replication) open between the hosts.
- Clocks synchronized with NTP or chrony. Token validation rejects requests when the clock skew exceeds 30 seconds.

## Install the package

Add the repository and install the package on every host:

```bash
curl -fsSL https://packages.nimbus.example/gpg | sudo gpg --dearmor -o /usr/share/keyrings/nimbus.gpg
echo "deb [signed-by=/usr/share/keyrings/nimbus.gpg] https://packages.nimbus.example/apt stable main" | sudo tee /etc/apt/sources.list.d/nimbus.list
sudo apt-get update && sudo apt-get install nimbus
```

The package creates a `nimbus` system user, installs `nimbusd` and `nimbusctl` into `/usr/bin`, and places a sample configuration at `/etc/nimbus/nimbus.toml`.

## Configure the cluster

Edit `/etc/nimbus/nimbus.toml` on each host. At a minimum, set the node name, the data directory and the list of seed peers:

```toml
[node]
name = "nimbus-a"
roles = ["broker", "scheduler", "storage"]

[cluster]
seeds = ["10.0.0.11:7401", "10.0.0.12:7401", "10.0.0.13:7401"]

[storage]
data_dir = "/var/lib/nimbus"
```

Only one scheduler is active at a time; the others stand by and take over if the leader fails.

## Start the service

```bash
sudo systemctl enable --now nimbusd
nimbusctl cluster status
```

`nimbusctl cluster status` should list all three nodes as `healthy` within a minute. If a node stays in `joining`, check that port 7401 is reachable and that every host lists the same seeds.

## Create the first tenant

A fresh cluster has only the built-in `system` tenant. Create a tenant and an administrator token before handing the cluster to users:

```bash
nimbusctl tenant create analytics
nimbusctl token create --tenant analytics --scope admin --ttl 720h
```

Store the printed token in your secrets manager; it is shown only once.
""")

add_doc("nimbus-install-kubernetes", "Installing Nimbus on Kubernetes", "guide", "installation", "2024-02-01", "public", """
Nimbus ships a Helm chart that deploys brokers, the scheduler and storage nodes as separate workloads. This guide covers a production-style installation on Kubernetes 1.27 or later.

## Before you begin

- A storage class that provisions block volumes with `ReadWriteOnce` access. Network file systems are not supported for storage nodes.
- Helm 3.12 or later.
- At least three schedulable nodes, so that the storage StatefulSet can spread its replicas across failure domains.

## Prepare values

Create a `values.yaml` that sets the replica counts and volume sizes:

```yaml
broker:
  replicas: 3
scheduler:
  replicas: 2
storage:
  replicas: 3
  volumeSize: 200Gi
  storageClassName: fast-ssd
config:
  queue.max_inflight_bytes: 512MiB
```

Any key under `config` is written verbatim into the generated `nimbus.toml`, so every setting from the configuration reference can be set here.

## Apply the chart

```bash
helm repo add nimbus https://charts.nimbus.example
helm install nimbus nimbus/nimbus -n nimbus --create-namespace -f values.yaml
```

The storage StatefulSet starts its pods one at a time. Each storage pod must join the cluster and finish its initial partition sync before the next one is created, so a three-replica install typically takes five to ten minutes. Do not interrupt the rollout while pods are still joining.

## Verify the installation

Once the last storage pod reports ready, open a shell in any broker pod and run `nimbusctl cluster status`. All storage nodes should show `healthy` and the scheduler should show exactly one `leader`. If two schedulers both claim leadership, the pods cannot reach each other on port 7401; check your network policies.

Next, expose the client API. The chart creates a `ClusterIP` service named `nimbus-api` on port 7400. Use an Ingress or a LoadBalancer service if clients run outside the cluster.

## Scaling and upgrades

Brokers are stateless and can be scaled freely with `helm upgrade --set broker.replicas=5`. Storage nodes hold data, so add them one at a time and let the rebalancer move partitions before adding the next. Never scale the storage StatefulSet down with Helm; use `nimbusctl node decommission` first so that partitions are moved off the node.

## Uninstalling

`helm uninstall` removes the workloads but leaves persistent volume claims in place, so data survives an accidental uninstall. Delete the claims manually once you are sure the data is no longer needed.
""")

add_doc("nimbus-config-queue", "Configuration Reference: Queue Settings", "reference", "configuration", "2024-04-08", "public", """
Queue settings live in the `[queue]` table of `nimbus.toml`. They can also be overridden per queue through the queues API, in which case the per-queue value wins. Sizes accept the suffixes `KiB`, `MiB` and `GiB`; durations accept `ms`, `s`, `m` and `h`.

## Flow control

### queue.max_inflight_bytes

The total size of job payloads that may be leased but not yet acknowledged, summed across all workers of a single queue. When the limit is reached, brokers stop handing out new leases for that queue until workers acknowledge or release jobs. Default: `256MiB`. Raising it increases throughput for large payloads at the cost of broker memory.

### queue.max_inflight_messages

The number of jobs that may be leased but not yet acknowledged on a single queue. Whichever of this and `queue.max_inflight_bytes` is hit first applies. Default: `10000`.

### queue.visibility_timeout

How long a leased job stays invisible to other workers. If the worker neither acknowledges nor extends the lease within this time, the job becomes visible again. Default: `30s`.

## Message size

### queue.max_message_bytes

The largest payload accepted for a single job. Enqueue requests above this size fail with `NMB-4012`. Default: `1MiB`. Maximum: `16MiB`.

### queue.max_batch_bytes

The largest combined payload accepted in a single batch enqueue request. Batches above this size fail with `NMB-4013`, even if every individual job is under `queue.max_message_bytes`. Default: `8MiB`.

### queue.max_batch_messages

The largest number of jobs accepted in one batch enqueue request. Batches with more jobs fail with `NMB-4014`. Default: `500`.

## Delivery

### queue.dedupe_window

How long the broker remembers deduplication keys. A second job with the same key inside this window is rejected with `NMB-4011`. Set to `0s` to disable deduplication. Default: `5m`. Introduced in v3.3.0.

### queue.dead_letter_after

The number of delivery attempts after which a job is moved to the queue's dead-letter queue instead of being retried again. Default: `5`. Set to `0` to retry forever, which is rarely a good idea.

### queue.retry_backoff

The base delay between retries of a failed job. The actual delay doubles with each attempt, up to `queue.retry_backoff_max`. Defaults: `2s` and `10m`.

## Example

```toml
[queue]
max_inflight_bytes = "512MiB"
max_message_bytes = "2MiB"
dedupe_window = "15m"
dead_letter_after = 8
```
""")

add_doc("nimbus-config-storage", "Configuration Reference: Storage Settings", "reference", "configuration", "2024-04-08", "public", """
Storage settings control where storage nodes keep data, how it is replicated, and how the on-disk format is maintained. They live in the `[storage]` table and apply to nodes that run the `storage` role. Most of them must be identical on every storage node; a node refuses to join a cluster whose values differ from its own.

## Placement

### storage.data_dir

The directory where partitions and objects are written. Use a dedicated disk formatted with ext4 or XFS. Default: `/var/lib/nimbus`.

### storage.backend

Either `local` (data on `storage.data_dir`) or `s3` (objects on an S3-compatible service, with only metadata and queue partitions kept locally). Changing the backend on an existing cluster requires a migration; see the storage troubleshooting guide. Default: `local`.

## Replication

### storage.replication_factor

How many copies of each partition and object the cluster keeps. Default: `3`.

### storage.write_quorum

How many replicas must confirm a write before it is acknowledged to the client. If fewer replicas respond in time, the write fails with `NMB-5021`. Default: `2`.

### storage.read_quorum

How many replicas must answer a read. If fewer respond, the read fails with `NMB-5022`. Default: `2`. Keeping `write_quorum + read_quorum > replication_factor` guarantees that reads see the latest acknowledged write.

### storage.replica_timeout

How long a storage node waits for a peer replica before counting it as missing for quorum purposes. Default: `2s`.

## Maintenance

### storage.compaction_interval

How often storage nodes merge small segment files and drop deleted records. Default: `1h`. Compaction runs are aligned to the wall clock, so with the default every node starts compacting at the top of each hour. Set `storage.compaction_jitter` to spread runs out.

### storage.compaction_jitter

A random delay added to each compaction run so that nodes do not compact at the same moment. Default: `0s`. A value of around a quarter of the interval, such as `15m`, works well for most clusters.

### storage.compaction_max_bytes

The most data a single compaction run may rewrite. Larger backlogs are carried over to the next run. If the backlog keeps growing, brokers start returning `NMB-5024`. Default: `4GiB`.

### storage.checksum_algorithm

The checksum stored with every segment and object part: `crc32c` or `xxh3`. Default: `crc32c`. Changing it affects only newly written data.
""")

add_doc("nimbus-config-scheduler", "Configuration Reference: Scheduler Settings", "reference", "configuration", "2024-04-08", "public", """
The scheduler assigns queue partitions to brokers, tracks worker liveness and decides where jobs run. Its settings live in the `[scheduler]` table. Only the active scheduler reads them, but keep them identical on standby schedulers so that behavior does not change after a failover.

## Worker liveness

### scheduler.heartbeat_interval

How often workers are expected to send a heartbeat. Client libraries read this value from the broker at connect time. Default: `10s`.

### scheduler.heartbeat_misses

How many consecutive heartbeats a worker may miss before the scheduler declares it dead and releases its leases. Default: `3`.

### scheduler.idle_grace_period

How long a worker may hold a session without leasing any job before the scheduler evicts it. Eviction closes the worker's session and frees its slot for other workers. Default: `300s` (changed from `600s` in v3.4.0). Set to `0s` to disable idle eviction.

### scheduler.idle_eviction_exempt_labels

A list of worker labels that are never evicted for being idle. Useful for standby workers that must stay connected. Default: empty.

## Placement

### scheduler.placement_strategy

Either `spread`, which distributes a queue's partitions across as many brokers as possible, or `pack`, which fills brokers before using new ones. Default: `spread`.

### scheduler.max_workers_per_queue

Upper bound on concurrently connected workers for one queue. Extra workers are queued in the scheduler and admitted as slots free up. Default: `1024`.

### scheduler.rebalance_interval

How often the scheduler checks whether partitions should move to even out load. Default: `5m`. A manual rebalance can be triggered with `nimbusctl cluster rebalance --force-rebalance`.

## Preemption

### scheduler.preemption_enabled

When `true`, jobs from high-priority queues may take worker slots from lower-priority queues. The preempted job is returned to its queue without counting as a failed attempt. Default: `false`.

### scheduler.preemption_min_runtime

A job that has been running for less than this time is never preempted, to avoid thrashing. Default: `30s`.

## Example

```toml
[scheduler]
idle_grace_period = "900s"
idle_eviction_exempt_labels = ["standby", "latency-critical"]
placement_strategy = "spread"
preemption_enabled = true
```
""")

add_doc("nimbus-auth-tokens", "Authentication with API Tokens", "guide", "authentication", "2024-04-08", "public", """
Every request to the Nimbus API must carry a bearer token. Tokens are signed JSON Web Tokens issued by the cluster itself, and each one belongs to a single tenant and carries a list of scopes.

## Token scopes

- `jobs:write`: enqueue jobs and manage leases.
- `jobs:read`: inspect jobs and queue statistics.
- `objects:write` and `objects:read`: upload and download objects.
- `admin`: manage queues, buckets, tokens and policies inside the tenant.

A request that lacks the required scope fails with `NMB-3005`.

## Creating tokens

```bash
nimbusctl token create --tenant analytics --scope jobs:write --scope jobs:read --ttl 24h
```

The `--ttl` flag sets the lifetime. Tokens without a TTL never expire, which is convenient for experiments but risky in production. Administrators can enforce an upper bound for a tenant with the `auth.max_token_ttl` setting; requests to create a token with a longer or missing TTL are then refused.

## Revoking tokens

`nimbusctl token revoke <token-id>` adds the token to the revocation list, which brokers replicate within a few seconds. Requests with a revoked token fail with `NMB-3003`.

## Rotating the signing key

Brokers sign tokens with the cluster signing key. Rotate it at least once a year, or immediately if you suspect it has leaked. Rotation is done in two phases so that existing tokens keep working during the change.

### Phase 1: introduce the new key

Run `nimbusctl auth key add`. The command generates a new key, distributes it to all brokers and marks it as `verify-only`. Brokers now accept tokens signed by either key but still sign new tokens with the old one. Wait until `nimbusctl auth key list` shows the new key on every broker.

### Phase 2: switch and retire

Run `nimbusctl auth key promote <key-id>` to make the new key the signing key. From this point new tokens use the new key. Reissue long-lived tokens, then run `nimbusctl auth key retire <old-key-id>`. Tokens signed with a retired key are rejected with `NMB-3007`, so check the audit log for recent use of the old key before retiring it.

## Clock skew

Token validation allows at most 30 seconds of clock skew between the issuing and validating brokers. Larger differences cause `NMB-3008`. Keep all hosts synchronized with NTP.
""")

add_doc("nimbus-auth-sso", "Single Sign-On for the Admin Console", "guide", "authentication", "2024-04-08", "public", """
Starting with v3.4.0, people can sign in to the Nimbus admin console and obtain short-lived tokens through an external identity provider using OpenID Connect. Service accounts still use API tokens; single sign-on is intended for humans.

## Register Nimbus with your identity provider

Create an OpenID Connect client in your identity provider with:

- Redirect URI: `https://<console-host>/auth/callback`
- Grant type: authorization code with PKCE
- Scopes: `openid`, `email`, `groups`

Note the issuer URL, client ID and client secret.

## Configure the brokers

Add an `[auth.oidc]` table to `nimbus.toml` on every broker:

```toml
[auth.oidc]
issuer = "https://login.example.com/"
client_id = "nimbus-console"
client_secret_file = "/etc/nimbus/oidc-secret"
groups_claim = "groups"
```

Restart brokers one at a time. The console shows a "Sign in with SSO" button once at least one broker has the setting.

## Map groups to tenants and roles

Identity-provider groups are mapped to Nimbus tenants and scopes with `nimbusctl auth sso map`:

```bash
nimbusctl auth sso map --group data-eng --tenant analytics --scope admin
nimbusctl auth sso map --group data-analysts --tenant analytics --scope jobs:read
```

A user who belongs to several mapped groups receives the union of their scopes. A user whose groups match no mapping can authenticate but is refused with `NMB-3010` and sees an empty console.

## Session tokens

After a successful sign-in, the broker issues a token valid for eight hours. It is bound to the browser session and refreshed silently while the console is open. Closing the browser does not revoke the token, but signing out does.

## Troubleshooting sign-in

- **Redirect loops** usually mean the redirect URI registered with the provider does not match the console host exactly, including the trailing path.
- **`NMB-3010` right after sign-in** means the assertion was valid but no group mapping matched. Check the `groups` claim in the ID token; some providers only include it when the `groups` scope is requested.
- **`NMB-3008`** means the broker's clock and the provider's clock disagree by more than 30 seconds.
""")

add_doc("nimbus-errors-3xxx", "Error Reference: Authentication Errors (NMB-3xxx)", "reference", "errors", "2024-04-08", "public", """
Codes in the NMB-3xxx range are returned when the broker cannot establish who is calling or whether they may perform the request. They are always returned with HTTP status 401 or 403 and are never retried automatically by the client libraries.

## NMB-3001: missing token

The request had no `Authorization` header, or the header did not use the `Bearer` scheme. HTTP 401. Add the header; if you are using a client library, check that the token environment variable is set.

## NMB-3002: token expired

The token's expiry time has passed. HTTP 401. Request a new token. If tokens expire sooner than expected, check the `--ttl` used when creating them and the tenant's `auth.max_token_ttl` limit.

## NMB-3003: token revoked

The token was valid but has been revoked by an administrator, or its tenant is suspended. HTTP 401. Revocation cannot be undone; create a new token.

## NMB-3004: token tenant mismatch

The token belongs to a different tenant than the resource in the request path. HTTP 403. This often happens when a script reuses a token across environments.

## NMB-3005: insufficient scope

The token is valid but lacks the scope the operation needs, for example calling an admin endpoint with a `jobs:write` token. HTTP 403. The response body lists the missing scope in the `required_scope` field.

## NMB-3007: unknown signing key

The token was signed with a key the broker does not recognize, either because that key has been retired or because the token was issued by a different cluster. HTTP 401. Reissue the token from the current cluster. After a key rotation, a burst of NMB-3007 errors means a client is still holding tokens signed with the retired key.

## NMB-3008: clock skew too large

The token's issued-at time is more than 30 seconds in the future relative to the broker's clock. HTTP 401. Synchronize clocks on all brokers and on the identity provider.

## NMB-3009: malformed token

The token could not be parsed as a JSON Web Token. HTTP 401. This usually means the token was truncated when copied, or that surrounding quotes were included.

## NMB-3010: SSO mapping not found

The user authenticated through single sign-on, but none of their identity-provider groups is mapped to a tenant. HTTP 403. Add a mapping with `nimbusctl auth sso map`.
""")

add_doc("nimbus-errors-4xxx", "Error Reference: Client Errors (NMB-4xxx)", "reference", "errors", "2024-05-02", "public", """
Codes in the NMB-4xxx range mean the request itself was rejected. Retrying the same request unchanged will fail again, with the exception of NMB-4018 and NMB-4029, which depend on timing. Each entry lists the HTTP status and the most common fix.

## Request format

### NMB-4001: malformed request body

The body could not be parsed as JSON, or a required field was missing. HTTP 400. The `detail` field of the response names the first offending field.

### NMB-4003: queue not found

The queue named in the path does not exist in the token's tenant. HTTP 404. Queue names are case-sensitive.

### NMB-4007: invalid priority

The job priority was outside the range 0 to 9. HTTP 400.

## Duplicates

### NMB-4010: job ID already exists

The client supplied an explicit job ID that is already in use in this queue. HTTP 409. Let the broker generate IDs unless you need idempotent retries.

### NMB-4011: duplicate deduplication key

A job with the same deduplication key was enqueued within the `queue.dedupe_window`. HTTP 409. The response includes the ID of the original job, so callers can treat this as success.

## Size limits

### NMB-4012: message too large

A single job payload is larger than `queue.max_message_bytes`. HTTP 413. Move large data into an object and put the object key in the job instead, or raise the limit for the queue.

### NMB-4013: batch too large

The combined payload of a batch enqueue request is larger than `queue.max_batch_bytes`. HTTP 413. Every job in the batch may be under the per-message limit and the batch can still be rejected. Split the batch into smaller requests, or raise the limit for the queue.

### NMB-4014: too many messages in batch

A batch enqueue request contains more jobs than `queue.max_batch_messages`. HTTP 413. Split the batch.

## Leases

### NMB-4018: lease expired

The worker tried to acknowledge or extend a lease after its visibility timeout ran out. The job may already have been given to another worker. HTTP 409. Extend leases well before they expire, or raise `queue.visibility_timeout`.

### NMB-4019: lease not held

The worker tried to acknowledge a job it never leased, or one leased by a different worker session. HTTP 409. This usually points to a bug in how the worker tracks lease tokens.

## Throttling and quotas

### NMB-4029: rate limit exceeded

The token or tenant has exceeded its request rate. HTTP 429. Wait for the number of seconds given in the `Retry-After` header before retrying. See the rate limits page for default limits.

### NMB-4031: tenant quota exceeded

The request would take the tenant over one of its quotas for queues, stored bytes or connected workers. HTTP 403. Ask a cluster administrator to raise the quota, or delete unused resources.
""")

add_doc("nimbus-errors-5xxx", "Error Reference: Server Errors (NMB-5xxx)", "reference", "errors", "2024-05-02", "public", """
Codes in the NMB-5xxx range mean the cluster could not complete a valid request. Most are transient, and the official client libraries retry them with exponential backoff. If the same code persists for more than a few minutes, follow the linked troubleshooting guide.

## General

### NMB-5001: internal error

An unexpected condition occurred inside the broker. HTTP 500. The response contains a `trace_id`; include it when reporting the problem.

### NMB-5003: broker unavailable

The broker that owns the target partition is shutting down or unreachable. HTTP 503. Clients retry against another broker automatically.

### NMB-5010: scheduler unavailable

No scheduler is currently leader, usually during a failover. HTTP 503. Failovers normally finish within 15 seconds.

## Storage quorum

### NMB-5020: storage node unreachable

A storage node that holds a replica of the requested partition did not respond to the broker at all. HTTP 503. Check that the node is running and that port 7402 is open.

### NMB-5021: write quorum not reached

Fewer than `storage.write_quorum` replicas confirmed a write within `storage.replica_timeout`. HTTP 503. The write was not acknowledged and may or may not be visible later. To fix it, check `nimbusctl node list` for storage nodes that are down or degraded, bring them back, and confirm that the remaining healthy replicas are at least equal to the write quorum. Slow disks on a single replica can also cause it; see the storage troubleshooting guide.

### NMB-5022: read quorum not reached

Fewer than `storage.read_quorum` replicas answered a read within `storage.replica_timeout`. HTTP 503. Reads are safe to retry. Persistent NMB-5022 errors usually mean two replicas of the same partition are unavailable at once.

### NMB-5023: replica checksum mismatch

Replicas returned different checksums for the same segment. HTTP 500. The broker serves the majority version and schedules a repair. Repeated NMB-5023 errors on one node point to failing hardware.

## Backpressure

### NMB-5024: compaction backlog exceeded

A storage node's compaction backlog has grown past twice `storage.compaction_max_bytes`, so it temporarily refuses new writes. HTTP 503. Raise `storage.compaction_max_bytes`, add disk throughput, or reduce write volume.

### NMB-5030: shutdown in progress

The node is draining before a shutdown or upgrade. HTTP 503. Clients retry elsewhere.
""")

add_doc("nimbus-errors-6xxx", "Error Reference: Object Storage Errors (NMB-6xxx)", "reference", "errors", "2024-04-08", "public", """
Codes in the NMB-6xxx range come from the object API: buckets, objects, multipart uploads and retention. They are returned with HTTP 4xx statuses, because they describe a problem with the request or with the object's state rather than a cluster failure.

## Buckets and objects

### NMB-6001: bucket not found

The bucket does not exist in the token's tenant. HTTP 404.

### NMB-6002: object not found

No object exists at the given key, or the requested version has been deleted. HTTP 404. Deleted versions remain listable for the duration of the bucket's soft-delete window.

### NMB-6003: version conflict

The request included an `If-Match` header with a version ID that is no longer current. Another writer updated the object first. HTTP 412. Re-read the object and retry the update.

## Retention

### NMB-6004: object under retention lock

The object is protected by a retention policy and cannot be deleted or overwritten until its lock expires. HTTP 409. The response includes the `locked_until` timestamp. Administrators cannot bypass a lock in `compliance` mode; in `governance` mode they can, using a token with the `admin` scope and the `X-Nimbus-Bypass-Retention: true` header.

### NMB-6005: retention cannot be shortened

A request tried to shorten or remove an existing lock. HTTP 409. Locks can be extended but never shortened in `compliance` mode.

### NMB-6006: retention policy invalid

The policy document failed validation, for example because the duration was negative or the mode was not `governance` or `compliance`. HTTP 400.

## Multipart uploads

### NMB-6008: multipart upload expired

The upload ID is older than the bucket's multipart expiry, 24 hours by default, and its parts have been discarded. HTTP 404. Start a new upload.

### NMB-6009: part checksum mismatch

The checksum sent with a part does not match the data the storage node received. HTTP 400. The part was not stored; resend it. Repeated failures for the same client usually indicate a proxy that rewrites request bodies.

### NMB-6010: too many parts

A multipart upload may have at most 10,000 parts. HTTP 400. Use larger parts.
""")

add_doc("nimbus-troubleshoot-workers", "Troubleshooting: Workers Disconnected or Evicted", "troubleshooting", "scheduling", "2024-04-20", "public", """
This guide helps when workers disappear from `nimbusctl worker list`, lose their leases unexpectedly, or reconnect in a loop. Start by finding the reason the scheduler recorded for the disconnect:

```bash
nimbusctl worker history --worker <worker-id> --limit 20
```

Each entry has a `reason` field. The sections below cover the common values.

## reason: idle_evicted

The scheduler evicts idle workers after the grace period. A worker counts as idle when it holds an open session but has not leased a job for longer than `scheduler.idle_grace_period`, which defaults to 300 seconds. Eviction frees the slot so that busy queues can admit other workers.

This is expected behavior for queues that receive work in bursts. If your workers should stay connected through quiet periods, either give them a label listed in `scheduler.idle_eviction_exempt_labels`, or raise the grace period. Client libraries reconnect after eviction, so the only visible effect is usually a short delay on the first job after a quiet spell.

Note that v3.4.0 lowered the default grace period from 600 to 300 seconds. Clusters that upgraded without setting the value explicitly see evictions twice as early.

## reason: heartbeat_timeout

The worker missed `scheduler.heartbeat_misses` consecutive heartbeats. Common causes:

- The worker process is blocked, for example by a long garbage-collection pause or a synchronous call that holds the thread that sends heartbeats.
- Network trouble between the worker and its broker.
- The worker host is overloaded and the process is not scheduled in time.

Run heartbeats on a dedicated thread, and check host CPU saturation around the time of the disconnect.

## reason: preempted

The scheduler took the worker slot for a higher-priority queue. This only happens when `scheduler.preemption_enabled` is `true`. Preempted jobs return to their queue without using up an attempt.

## reason: broker_shutdown

The broker the worker was connected to was drained or restarted. Workers reconnect to another broker automatically. If you see many of these outside planned maintenance, check the broker logs for crashes.

## Workers never connect

If a worker never appears at all, check its logs for NMB-3xxx authentication errors first, then for `NMB-5010`, which means no scheduler is leader. Also check that the queue has not reached `scheduler.max_workers_per_queue`; extra workers wait silently until a slot frees up.
""")

add_doc("nimbus-troubleshoot-latency", "Troubleshooting: High Enqueue and Lease Latency", "troubleshooting", "performance", "2024-03-10", "public", """
Use this guide when enqueue or lease calls take noticeably longer than usual. Nimbus reports latency per operation in the `nimbus_request_duration_seconds` histogram; compare the p99 of the affected operation with its baseline before changing anything.

## Periodic spikes

If latency jumps at regular times and then recovers, look for scheduled background work.

### Spikes at the top of the hour

Compaction is the most common cause. By default, storage nodes compact every hour and the runs are aligned to the wall clock, so every node in the cluster rewrites segment files at the same minute. During that window, disk bandwidth is shared between compaction and client writes, and p99 write latency can rise by an order of magnitude.

Set `storage.compaction_jitter` to spread the runs, for example to `15m`. Nodes then start compacting at random offsets within the window and the cluster never has all nodes compacting at once.

### Spikes every five minutes

The scheduler's rebalance check runs every `scheduler.rebalance_interval`. If partitions move on every check, the load is close to a threshold and partitions bounce between brokers. Raise the interval or switch `scheduler.placement_strategy` to `pack`.

## Sustained high latency

### Inflight limits

When a queue reaches `queue.max_inflight_bytes` or `queue.max_inflight_messages`, lease calls wait until capacity frees up. The `nimbus_queue_inflight_bytes` gauge shows how close each queue is to the limit. If workers are healthy but slow, raising the limit only moves the problem; add workers instead.

### Slow storage replicas

Writes wait for `storage.write_quorum` replicas. A single slow disk will not slow writes when the quorum is 2 of 3, but two slow disks will. Check `nimbus_storage_fsync_seconds` per node.

### Hot partitions

A queue with one partition is served by one broker. If a single queue carries most traffic, increase its partition count through the queues API so that the load spreads across brokers.

## Collecting data for support

If none of the above applies, capture a profile while the problem is happening:

```bash
nimbusctl debug bundle --duration 60s --output nimbus-debug.tar.gz
```

The bundle contains CPU profiles, recent logs and a snapshot of metrics from every node.
""")

add_doc("nimbus-troubleshoot-storage", "Troubleshooting: Storage Nodes and Quorum Errors", "troubleshooting", "storage", "2024-05-02", "public", """
This guide covers storage nodes that fall behind, quorum errors, full disks, and migrating between storage backends.

## Quorum errors

`NMB-5021` (write quorum) and `NMB-5022` (read quorum) both mean that too few replicas answered in time, but they have different typical causes.

### Write quorum failures

In a cluster running the default 2-of-3 write quorum, a single unhealthy node is tolerated. When NMB-5021 appears while only one node is down, the usual cause is a second node whose disk is too slow to answer within `storage.replica_timeout`. Check `nimbus_storage_fsync_seconds` for every node and replace or fix the slow disk. Raising `storage.replica_timeout` hides the symptom but makes every failed write slower.

Before v3.4.1, a bug could report NMB-5021 when a replica answered just after the timeout even though the write had been acknowledged by two replicas. Upgrade if you see NMB-5021 with healthy fsync latencies.

### Read quorum failures

NMB-5022 errors on reads of old data often point to a partition with two replicas on the same failed rack. Run `nimbusctl partition list --under-replicated` and let the repair finish before taking more nodes offline.

## Disk space

Storage nodes stop accepting writes at 95% disk usage and return `NMB-5020` to brokers, which looks like the node is unreachable. Free space or expand the volume; the node resumes automatically at 90%.

## Migrating from local to S3 backend

Moving objects to an S3-compatible backend is done node by node and does not require downtime. Queue partitions always stay on local disk.

### Prepare the bucket

Create a bucket on the S3-compatible service for each storage node and give the node credentials that can read, write and list it. Add the bucket details to the node's configuration but keep `storage.backend = "local"` for now. Then start the copy with `nimbusctl storage migrate start --node <node>`; it copies existing objects in the background while the node keeps serving.

### Switch the node

When `nimbusctl storage migrate status` reports `copied`, set `storage.backend = "s3"` on that node and restart it. The node reads new and existing objects from S3 from then on. Repeat for the next node only after the first has been healthy for a full compaction cycle.

### Clean up

After every node has switched, run `nimbusctl storage migrate finish` to delete the local copies of migrated objects and reclaim disk space. Until then, a node can be switched back to `local` by reversing the setting and restarting it.
""")

add_doc("nimbus-troubleshoot-connectivity", "Troubleshooting: Client Connection Problems", "troubleshooting", "networking", "2024-02-15", "public", """
Use this guide when clients cannot reach the Nimbus API at all, or connections drop intermittently. Errors in this category usually come from the client library or the operating system rather than from Nimbus, so they do not carry an `NMB-` code.

## Connection refused

The client reached the host but nothing listens on the port. Check that:

- `nimbusd` is running on the host with the `broker` role.
- The client uses port 7400. Ports 7401 and 7402 are for cluster traffic and reject client connections.
- A load balancer in front of the brokers has healthy targets. Brokers answer `GET /healthz` with HTTP 200 once they have joined the cluster.

## TLS handshake failures

Brokers present the certificate configured in `tls.cert_file`. Handshake failures are almost always caused by a certificate that does not include the hostname clients use, or by clients that do not trust the issuing CA. Run:

```bash
openssl s_client -connect nimbus.internal:7400 -servername nimbus.internal
```

and compare the subject alternative names with the hostname in the client configuration. Brokers reload the certificate file when it changes, so renewing it does not require a restart.

## Connections dropped after 60 seconds

Many load balancers close idle TCP connections after 60 seconds. Workers that long-poll for jobs may appear to hang and then fail with a connection reset. Either raise the idle timeout on the load balancer above the long-poll duration, or lower the client's `poll_wait` setting to 50 seconds or less.

## Intermittent resets during deployments

When a broker is drained, it stops accepting new connections and returns `NMB-5030` on existing ones once in-flight requests finish. Clients retry on another broker. If clients fail instead of retrying, check that they are pointed at the load balancer rather than at a single broker address.

## DNS caching

Some runtimes cache DNS results forever by default. After brokers are replaced and receive new IP addresses, such clients keep connecting to the old ones. Configure a DNS cache lifetime of 60 seconds or less in the client runtime.
""")

add_doc("nimbus-release-3-2-0", "Release Notes: Nimbus v3.2.0", "release-notes", "releases", "2023-06-12", "public", """
Nimbus v3.2.0 was released on 2023-06-12. It is a feature release; clusters on v3.1.x can upgrade directly with a rolling restart.

## New features

- **Dead-letter queues.** Jobs that fail `queue.dead_letter_after` times are moved to a dead-letter queue named `<queue>.dlq` instead of being retried forever. The default is 5 attempts. Existing queues keep retrying forever until the setting is applied to them.
- **Multipart uploads.** Objects larger than 5 GiB can now be uploaded in parts through the object API. Parts that fail their checksum are rejected with `NMB-6009`.
- **`nimbusctl debug bundle`** collects logs, profiles and metrics from every node into one archive.

## Changes

- The `queue.max_message_bytes` limit is now enforced on brokers instead of storage nodes, so oversized jobs fail earlier with `NMB-4012` and no longer consume replication bandwidth.
- The `nimbus_queue_depth` gauge is now reported per partition as well as per queue.
- The Python client requires Python 3.9 or later.

## Fixed issues

- Fixed a crash in the scheduler when a worker disconnected while its lease was being extended.
- Fixed `NMB-4019` being returned for acknowledgements sent immediately after a lease extension.
- Fixed incorrect `Retry-After` values on `NMB-4029` responses when a tenant limit and a token limit were both exceeded.

## Deprecations

- The `storage.sync_mode` setting is deprecated and will be removed in v3.4.0. Storage nodes now always use group commit.
- The `/v1/` API prefix is deprecated; use `/v2/`.

## Upgrade notes

Upgrade storage nodes before brokers. Brokers running v3.2.0 enforce the message size limit themselves, and older storage nodes would reject some requests that new brokers accept if the limits differ between configurations. Run `nimbusctl cluster check-config` to compare settings across nodes before you start.
""")

add_doc("nimbus-release-3-3-0", "Release Notes: Nimbus v3.3.0", "release-notes", "releases", "2023-11-20", "public", """
Nimbus v3.3.0 was released on 2023-11-20. This release focuses on delivery guarantees and storage maintenance.

## New features

- **Deduplication keys.** Producers can attach a `dedupe_key` to a job. A second job with the same key within `queue.dedupe_window` (default `5m`) is rejected with the new error `NMB-4011`, and the response includes the ID of the original job.
- **Compaction backpressure.** Storage nodes now refuse writes with the new error `NMB-5024` when their compaction backlog exceeds twice `storage.compaction_max_bytes`, instead of letting the disk fill up.
- **Priority queues.** Jobs accept a `priority` from 0 to 9. Out-of-range values are rejected with `NMB-4007`.
- **Retention policies** for buckets, in `governance` and `compliance` modes. Locked objects return `NMB-6004` on delete.

## Changes

- `queue.max_batch_bytes` now defaults to `8MiB` (previously `4MiB`). Batches above the limit still fail with `NMB-4013`.
- `nimbusctl node drain` gained the `--drain-timeout` flag; previously draining waited indefinitely for in-flight jobs.
- Heartbeat intervals are now announced by brokers at connect time instead of being hard-coded in client libraries.

## Fixed issues

- Fixed `NMB-5022` being returned for reads of objects whose replicas were being repaired.
- Fixed a memory leak in brokers with more than 10,000 connected workers.
- Fixed `nimbusctl queue purge` ignoring the `--older-than` flag for dead-letter queues.

## Removed

- The `storage.sync_mode` setting, deprecated in v3.2.0, is now ignored and logs a warning at startup.

## Upgrade notes

Deduplication is enabled by default on all queues after upgrading. Producers that intentionally send the same key twice should set `queue.dedupe_window = "0s"` for the affected queues before upgrading.
""")

add_doc("nimbus-release-3-4-0", "Release Notes: Nimbus v3.4.0", "release-notes", "releases", "2024-04-08", "public", """
Nimbus v3.4.0 was released on 2024-04-08. It adds single sign-on, changes several scheduler defaults, and removes settings deprecated in earlier releases. Read the upgrade notes before upgrading production clusters.

## New features

- **Single sign-on** for the admin console through OpenID Connect, with identity-provider groups mapped to tenants and scopes. Users without a matching mapping receive `NMB-3010`.
- **Signing key rotation** with `nimbusctl auth key add`, `promote` and `retire`. Tokens signed with a retired key fail with `NMB-3007`.
- **Idle eviction exemptions** through `scheduler.idle_eviction_exempt_labels`.
- **Compaction jitter.** The new `storage.compaction_jitter` setting spreads compaction runs across nodes.
- **Forced rebalancing** with `nimbusctl cluster rebalance --force-rebalance`, which moves partitions immediately instead of waiting for the next `scheduler.rebalance_interval`.

## Changed defaults

- `scheduler.idle_grace_period` now defaults to `300s` (previously `600s`).
- `scheduler.placement_strategy` now defaults to `spread` (previously `pack`).
- `queue.max_inflight_bytes` now defaults to `256MiB` (previously `128MiB`).

## Fixed issues

- Fixed a race where two schedulers could both act as leader for a few seconds after a network partition healed.
- Fixed `NMB-4012` being reported instead of `NMB-4014` when a batch had too many messages.
- Fixed object listings skipping keys that contained a `%` character.

## Removed

- `storage.sync_mode` has been removed; configurations that still set it fail validation.
- The `/v1/` API prefix has been removed.

## Known issues

- Under heavy write load, brokers may occasionally report `NMB-5021` for writes that were in fact acknowledged by a quorum. Fixed in v3.4.1.

## Upgrade notes

Upgrading from v3.2.x requires going through v3.3.x first. Remove `storage.sync_mode` from all configurations before upgrading, or nodes will refuse to start. If you depend on the old eviction behavior, set `scheduler.idle_grace_period = "600s"` explicitly.
""")

add_doc("nimbus-release-3-4-1", "Release Notes: Nimbus v3.4.1", "release-notes", "releases", "2024-05-02", "public", """
Nimbus v3.4.1 was released on 2024-05-02. It is a patch release with bug fixes only and no configuration changes. All clusters running v3.4.0 should upgrade.

## Fixed issues

### Storage

- Fixed brokers reporting `NMB-5021` (write quorum not reached) when a third replica answered after `storage.replica_timeout` even though two replicas had already confirmed the write. The write was durable, but clients retried it and could create duplicate jobs when no deduplication key was set.
- Fixed `NMB-5022` being reported for reads that hit a replica during compaction, when the remaining replicas could still satisfy the read quorum.
- Fixed compaction runs ignoring `storage.compaction_jitter` on nodes that were restarted after the upgrade to v3.4.0.

### Queues

- Fixed `NMB-4013` being reported as `NMB-4012` when a batch request exceeded `queue.max_batch_bytes` and contained one oversized job. Both errors are now reported with the offending job's index.
- Fixed `queue.max_inflight_bytes` not being applied to queues created through the API without an explicit override.

### Authentication

- Fixed `NMB-3007` being returned for valid tokens for up to 30 seconds after `nimbusctl auth key promote` on brokers that had not yet received the promotion.
- Fixed single sign-on failing with `NMB-3010` when the `groups` claim contained a single string instead of a list.

### Command-line tool

- Fixed `nimbusctl node drain --drain-timeout` treating a value without a unit as minutes instead of seconds.

## Upgrade notes

This release can be applied with a rolling restart. No configuration changes are needed. Clusters still on v3.3.x can upgrade directly to v3.4.1; the v3.4.0 upgrade notes still apply.
""")

add_doc("nimbus-release-3-4-2", "Release Notes: Nimbus v3.4.2", "release-notes", "releases", "2024-06-18", "public", """
Nimbus v3.4.2 was released on 2024-06-18. It contains one security fix and several small bug fixes. Upgrading is strongly recommended for clusters that expose the admin console outside a trusted network.

## Security

- Fixed an issue where the admin console accepted an ID token from the configured identity provider even when it had been issued to a different OpenID Connect client. An attacker with an account at the same provider could obtain a console session. Brokers now check the token's audience against `auth.oidc.client_id`. Tokens rejected by the new check fail with `NMB-3010`.

## Fixed issues

- Fixed `NMB-6008` being returned for multipart uploads that were still active but had been idle for exactly 24 hours.
- Fixed `NMB-5023` being logged at error level for checksum mismatches that were repaired automatically; these are now logged as warnings.
- Fixed `nimbusctl snapshot restore` failing with `NMB-4003` when the snapshot contained a queue whose name differed only in case from an existing queue.
- Fixed the `nimbus_worker_evictions_total` metric not being incremented for idle evictions.
- Fixed `nimbusctl tenant delete --dry-run` actually deleting empty buckets.

## Changes

- `nimbusctl debug bundle` now redacts tokens and secrets from collected configuration files.
- The `nimbus_request_duration_seconds` histogram gained buckets at 2.5 and 5 seconds.

## Compatibility

Client libraries released for v3.4.0 and v3.4.1 work unchanged with v3.4.2. The on-disk format is unchanged, so a node can be rolled back to v3.4.1 if needed, although doing so reintroduces the security issue described above.

## Upgrade notes

No configuration changes are needed. Apply with a rolling restart, starting with brokers. After upgrading, users signed in through single sign-on may have to sign in again once.
""")

add_doc("nimbus-api-jobs", "API Reference: Jobs", "api", "api", "2024-04-08", "public", """
The jobs API enqueues, leases, acknowledges and cancels jobs. All paths are relative to `https://<broker>:7400/v2/tenants/{tenant}` and require a bearer token.

## Enqueue a job

`POST /queues/{queue}/jobs`

```json
{
  "payload": "eyJyZXBvcnQiOiAibW9udGhseSJ9",
  "priority": 5,
  "dedupe_key": "report-2024-05",
  "delay": "30s"
}
```

`payload` is base64-encoded and limited by `queue.max_message_bytes`. `delay` postpones visibility. The response contains the job ID. Requires the `jobs:write` scope.

## Enqueue a batch

`POST /queues/{queue}/jobs:batch` with a `jobs` array of the same objects. The batch is accepted or rejected as a whole. Limits: `queue.max_batch_messages` jobs and `queue.max_batch_bytes` in total.

## Lease jobs

`POST /queues/{queue}/leases`

```json
{ "max_jobs": 10, "wait": "20s", "visibility_timeout": "2m" }
```

Returns up to `max_jobs` jobs, each with a `lease_token`. If no jobs are available, the call waits up to `wait` before returning an empty list.

## Acknowledge, extend or release

- `POST /leases/{lease_token}:ack` marks the job done.
- `POST /leases/{lease_token}:extend` with `{"by": "2m"}` keeps it invisible longer.
- `POST /leases/{lease_token}:release` returns the job to the queue immediately, counting as a failed attempt unless `{"count_attempt": false}` is sent.

## Cancel a job

`POST /jobs/{job_id}:cancel`

Canceling a job that is still waiting removes it from the queue. Canceling a job that a worker is currently running marks it as `canceling`: the worker's next extend or acknowledge call fails with `NMB-4018`, which tells a well-behaved worker to stop. A job that has already finished cannot be canceled. Requires `jobs:write`.

## Get a job

`GET /jobs/{job_id}` returns the job's state (`waiting`, `leased`, `canceling`, `done`, `dead`), attempt count, timestamps and the last error message reported by a worker.

## List jobs

`GET /queues/{queue}/jobs?state=dead&limit=100` lists jobs in a queue, filtered by state. Results are paginated with an opaque `page_token`; pass it back unchanged to fetch the next page. Listing requires the `jobs:read` scope and returns at most 1,000 jobs per page.
""")

add_doc("nimbus-api-queues", "API Reference: Queues", "api", "api", "2024-04-08", "public", """
The queues API creates, configures and inspects queues. Paths are relative to `/v2/tenants/{tenant}`. Creating, changing and deleting queues requires the `admin` scope; reading statistics requires `jobs:read`.

## Create a queue

`PUT /queues/{queue}`

```json
{
  "partitions": 4,
  "overrides": {
    "queue.max_message_bytes": "4MiB",
    "queue.visibility_timeout": "5m"
  }
}
```

Queue names may contain letters, digits, dots, dashes and underscores, up to 128 characters. Names ending in `.dlq` are reserved for dead-letter queues. Any key from the queue configuration reference can be overridden for a single queue.

## Change partitions

`PATCH /queues/{queue}` with `{"partitions": 8}`. Partition counts can only increase. New partitions start empty, and producers start using them immediately; ordering is guaranteed only within a partition.

## Queue statistics

`GET /queues/{queue}/stats` returns:

- `depth`: jobs waiting to be leased.
- `inflight`: jobs currently leased.
- `inflight_bytes`: payload bytes currently leased, compared against `queue.max_inflight_bytes`.
- `oldest_waiting_age`: age of the oldest waiting job, in seconds.
- `dead`: jobs in the dead-letter queue.

## Pause and resume

`POST /queues/{queue}:pause` stops new leases while still accepting new jobs. Workers already holding leases can finish them. `POST /queues/{queue}:resume` restarts leasing. Pausing is useful during maintenance of downstream systems.

## Purge

`POST /queues/{queue}:purge` with an optional `older_than` duration deletes waiting jobs. Leased jobs are not affected. Purged jobs cannot be recovered, even from snapshots taken afterwards.

## Delete a queue

`DELETE /queues/{queue}` deletes the queue, its dead-letter queue and all jobs. The call fails with `NMB-4003` if the queue does not exist, and refuses to delete a queue with leased jobs unless `?force=true` is given.
""")

add_doc("nimbus-api-objects", "API Reference: Objects and Buckets", "api", "storage", "2024-04-08", "public", """
The object API stores files of any size in buckets. Paths are relative to `/v2/tenants/{tenant}`. Reads require `objects:read`, writes require `objects:write`, and bucket management requires `admin`.

## Buckets

- `PUT /buckets/{bucket}` creates a bucket. The body may set `versioning` (`true` or `false`) and `soft_delete_window` (default `7d`).
- `GET /buckets` lists buckets in the tenant.
- `DELETE /buckets/{bucket}` deletes an empty bucket. Non-empty buckets return HTTP 409.

## Upload an object

`PUT /buckets/{bucket}/objects/{key}` with the object data as the body. Objects up to 5 GiB can be uploaded in one request. Send `Content-MD5` or `X-Nimbus-Checksum-CRC32C` to have the storage node verify the data. The response includes the new version ID.

Conditional writes use `If-Match: <version-id>`; if another writer got there first, the request fails with `NMB-6003`.

## Multipart upload

For larger objects:

1. `POST /buckets/{bucket}/uploads` with `{"key": "..."}` returns an `upload_id`.
2. `PUT /buckets/{bucket}/uploads/{upload_id}/parts/{n}` uploads part `n`, 5 MiB to 5 GiB each.
3. `POST /buckets/{bucket}/uploads/{upload_id}:complete` with the list of part numbers and checksums assembles the object.

Incomplete uploads are discarded after 24 hours.

## Download an object

`GET /buckets/{bucket}/objects/{key}` returns the current version. Add `?version=<id>` for an older version and a `Range` header for partial reads.

## Delete an object

`DELETE /buckets/{bucket}/objects/{key}` deletes the current version. In versioned buckets, older versions remain. Deleted versions can be restored within the bucket's soft-delete window with `POST /buckets/{bucket}/objects/{key}:undelete`. Objects under a retention lock fail with `NMB-6004`.

## Retention

`PUT /buckets/{bucket}/retention` sets a default policy for new objects:

```json
{ "mode": "compliance", "duration": "365d" }
```

The policy applies only to objects written after it is set. See the retention guide for the difference between `governance` and `compliance` modes.
""")

add_doc("nimbus-api-admin", "API Reference: Administration", "api", "administration", "2024-04-08", "public", """
The administration API manages tenants, tokens and cluster-wide settings. Tenant-level endpoints require the `admin` scope in that tenant. Cluster-level endpoints under `/v2/cluster` require a token from the built-in `system` tenant.

## Tenants

- `POST /v2/cluster/tenants` with `{"name": "analytics"}` creates a tenant.
- `GET /v2/cluster/tenants` lists tenants with their quota usage.
- `DELETE /v2/cluster/tenants/{tenant}` schedules deletion. See the tenant administration guide for the full procedure.

## Tokens

- `POST /v2/tenants/{tenant}/tokens` creates a token. Body: `{"scopes": ["jobs:write"], "ttl": "24h", "description": "nightly report worker"}`. The secret is returned only in this response.
- `GET /v2/tenants/{tenant}/tokens` lists tokens without their secret values.
- `DELETE /v2/tenants/{tenant}/tokens/{token_id}` revokes a token.

## Quotas

`PUT /v2/cluster/tenants/{tenant}/quotas` sets limits for a tenant:

```json
{
  "max_queues": 200,
  "max_storage_bytes": "2TiB",
  "requests_per_minute": 6000,
  "max_connected_workers": 500
}
```

Requests that would exceed a quota fail with `NMB-4031`. Lowering a quota below current usage is allowed and blocks only new resources.

## Audit log

`GET /v2/tenants/{tenant}/audit?since=2024-05-01T00:00:00Z` returns administrative actions: token creation and revocation, queue and bucket changes, retention changes and sign-ins. Each entry records the acting token ID, the source address and the request ID. Audit entries are kept for 400 days.

## Cluster settings

`GET /v2/cluster/config` returns the effective configuration of every node, with secrets removed. `POST /v2/cluster/config:check` compares the nodes and reports keys whose values differ, the same check that `nimbusctl cluster check-config` runs.

## Conventions

All administration endpoints return JSON and accept `Idempotency-Key` headers on `POST` requests, so a retried call that already succeeded returns the original result instead of creating a second tenant or token. List endpoints are paginated with `limit` (at most 500) and an opaque `page_token`. Errors use the same `NMB-` codes as the rest of the API; calling a cluster-level endpoint with a token from an ordinary tenant fails with `NMB-3005`.
""")

add_doc("nimbus-rate-limits", "Rate Limits", "reference", "api", "2024-04-08", "public", """
Nimbus limits how many API requests each caller can make so that one busy client cannot starve the rest of the tenant or the cluster. Limits are enforced by brokers using a token bucket per token and per tenant.

## Default limits

| Scope | Sustained rate | Burst |
|---|---|---|
| Per token | 600 requests per minute | 100 requests |
| Per tenant | 6,000 requests per minute | 1,000 requests |

Both limits apply at once. A request is allowed only if both the token's bucket and the tenant's bucket have capacity. Cluster administrators can change the tenant limit through the quotas API; per-token limits are set with `auth.token_requests_per_minute`.

## What counts as a request

- Every HTTP call counts as one request, including those that fail.
- A batch enqueue counts as one request regardless of how many jobs it holds, which makes batching the easiest way to stay under the limit.
- Long-poll lease calls count once when they are made, not for the time they spend waiting.
- Health checks on `/healthz` are not counted.

## When a limit is exceeded

The broker answers with HTTP 429 and error `NMB-4029`. The `Retry-After` header says how many seconds to wait, and the `X-Nimbus-RateLimit-Scope` header says whether the token or the tenant limit was hit. The official client libraries wait and retry automatically, up to three times.

## Staying under the limits

- Use batch enqueue for bursts of jobs.
- Lease several jobs per call with `max_jobs` instead of one at a time.
- Use `wait` on lease calls so idle workers do not poll in a tight loop.
- Give each service its own token so that one noisy service hits its own limit first.

## Monitoring

The `nimbus_ratelimit_rejections_total` counter, labeled by tenant and scope, shows how often callers are throttled. A sustained non-zero rate for a tenant usually means it needs a higher limit or better batching.
""")

add_doc("nimbus-backup-restore", "Backup and Restore", "guide", "operations", "2024-03-01", "public", """
Nimbus protects data against single-node failures through replication, but replication does not help against operator mistakes, bugs or the loss of a whole cluster. Snapshots fill that gap. A snapshot is a consistent copy of queue partitions, object metadata and, optionally, object data, written to an external location.

## Snapshot targets

Snapshots are written to an S3-compatible bucket or to a shared filesystem mounted on every storage node. Configure the target in the `[backup]` table:

```toml
[backup]
target = "s3://nimbus-snapshots/prod"
credentials_file = "/etc/nimbus/backup-credentials"
```

## Taking snapshots

```bash
nimbusctl snapshot create --name nightly-2024-05-10 --include-objects
```

Without `--include-objects`, the snapshot holds queue data and object metadata only, which is much smaller but cannot bring back object contents if the storage nodes are lost. Snapshots are incremental: segments that have not changed since the previous snapshot are referenced rather than copied again.

Schedule snapshots with the `backup.schedule` setting, which takes a cron expression, and prune old ones with `backup.keep_last`, which defaults to 14.

## Restoring

A restore always goes into a cluster that has no data for the tenants being restored. You cannot merge a snapshot into live queues.

### Prepare the target cluster

Install a cluster of the same or a newer minor version as the one that took the snapshot. It needs at least as many storage nodes as the snapshot's replication factor. Create the tenants you want to restore, but do not create any queues or buckets in them. Point the new cluster's `[backup]` table at the same target so it can read the snapshot list.

### Run the restore

List available snapshots with `nimbusctl snapshot list`, then start the restore:

```bash
nimbusctl snapshot restore --name nightly-2024-05-10 --tenant analytics
```

The command restores queue partitions first and objects second. Jobs that were leased when the snapshot was taken come back as waiting, so they will run again; make sure your workers are idempotent. Once the command prints `restore complete`, run `nimbusctl cluster status` and check that partition counts match the original.

## Testing restores

A backup that has never been restored is a hope, not a plan. Restore the latest snapshot into a scratch cluster at least once a quarter and compare queue depths and object counts with production.
""")

add_doc("nimbus-disaster-recovery", "Disaster Recovery and Regional Failover", "guide", "operations", "2024-03-01", "internal", """
This runbook describes how the platform team recovers Nimbus after losing a complete cluster, and how to fail over to the standby cluster in the secondary data center. It is internal and assumes access to the operations bastion.

## Recovery objectives

- **Recovery point objective:** 15 minutes for queue data, 24 hours for object contents.
- **Recovery time objective:** 2 hours for the primary tenants, 8 hours for everything else.

The queue objective is met by continuous replication to the standby cluster. The object objective is met by nightly snapshots taken with `--include-objects`.

## Standby cluster

The standby cluster runs in the secondary data center with the same version and configuration as the primary. Queue partitions are replicated to it asynchronously with `nimbusctl replication stream`. The standby accepts no client traffic while in `follower` mode; its brokers answer every request with `NMB-5003`.

## Failover procedure

Only the incident commander can authorize a failover. Once authorized, work through the steps below in order.

### Step 1: stop the primary

If any part of the primary is still reachable, fence it with `nimbusctl cluster fence --reason "regional failover"`. Fencing makes every primary broker refuse writes, so that clients cannot write to both clusters at once. If the primary is unreachable, skip this step and ask the network team to withdraw the primary's DNS records instead.

### Step 2: promote the standby

Run `nimbusctl replication promote` on the standby. The command waits for the replication stream to apply everything it has received, then switches the cluster to `leader` mode. Replicated jobs that were leased on the primary come back as waiting.

### Step 3: move traffic

Update the `nimbus.internal` DNS record to point at the standby's load balancer. Clients pick up the change within the DNS lifetime, which is 60 seconds.

## Failing back

After the primary is repaired, rebuild it as a follower of the new leader from a fresh snapshot, let replication catch up, and repeat the failover procedure in the opposite direction during a maintenance window.
""")

add_doc("nimbus-monitoring-metrics", "Monitoring: Metrics Reference", "reference", "monitoring", "2024-04-08", "public", """
Every Nimbus node exposes Prometheus metrics on `http://<node>:7403/metrics`. This page lists the metrics most useful for dashboards and alerts. All metrics carry `node` and `role` labels; queue metrics also carry `tenant` and `queue`.

## Queue metrics

- `nimbus_queue_depth` (gauge): jobs waiting to be leased. A steadily rising depth means producers are outpacing workers.
- `nimbus_queue_oldest_waiting_seconds` (gauge): age of the oldest waiting job. This is usually a better alert signal than depth, because it reflects how long users actually wait.
- `nimbus_queue_inflight_bytes` (gauge): payload bytes currently leased, to compare with `queue.max_inflight_bytes`.
- `nimbus_queue_dead_total` (counter): jobs moved to dead-letter queues.

## Worker metrics

- `nimbus_workers_connected` (gauge): connected workers per queue.
- `nimbus_worker_evictions_total` (counter): evictions, labeled by `reason` (`idle_evicted`, `heartbeat_timeout`, `preempted`).

## Request metrics

- `nimbus_request_duration_seconds` (histogram): broker request latency by `operation`.
- `nimbus_request_errors_total` (counter): failed requests by `code`, for example `code="NMB-5021"`.
- `nimbus_ratelimit_rejections_total` (counter): throttled requests by `scope`.

## Storage metrics

- `nimbus_storage_disk_used_ratio` (gauge): fraction of the data disk in use. Writes stop at 0.95.
- `nimbus_storage_fsync_seconds` (histogram): time spent flushing segments to disk.
- `nimbus_storage_compaction_backlog_bytes` (gauge): data waiting to be compacted.
- `nimbus_partition_under_replicated` (gauge): partitions with fewer replicas than `storage.replication_factor`.

## Scrape configuration

```yaml
scrape_configs:
  - job_name: nimbus
    scrape_interval: 15s
    static_configs:
      - targets: ["nimbus-a:7403", "nimbus-b:7403", "nimbus-c:7403"]
```

Scraping every 15 seconds is enough for alerting. The metrics endpoint is unauthenticated; restrict port 7403 to your monitoring network.

## Dashboards

A useful first dashboard has one row per concern. Put queue depth and the age of the oldest waiting job side by side, because depth alone hides whether work is actually stuck. Add worker counts and evictions by reason underneath, then request latency percentiles and error rates by code. Finish with disk usage, fsync latency and compaction backlog per storage node. Filter the whole dashboard by the `tenant` label so each team can see its own queues without the noise of the rest of the cluster.
""")

add_doc("nimbus-monitoring-alerts", "Monitoring: Recommended Alerts", "guide", "monitoring", "2024-04-08", "public", """
These alerting rules cover the failures that most often affect Nimbus users. Tune thresholds to your traffic, but start with these values; they were chosen to page a human only when someone needs to act.

## Paging alerts

Paging alerts are routed to the on-call engineer at any hour through your paging integration.

### Jobs waiting too long

```yaml
- alert: NimbusJobsWaitingTooLong
  expr: max by (tenant, queue) (nimbus_queue_oldest_waiting_seconds) > 900
  for: 10m
  labels:
    severity: page
```

Fires when any queue has had a job waiting for more than 15 minutes for ten minutes in a row.

### Quorum errors

```yaml
- alert: NimbusQuorumErrors
  expr: sum(rate(nimbus_request_errors_total{code=~"NMB-502[12]"}[5m])) > 1
  for: 5m
  labels:
    severity: page
```

Sustained write or read quorum failures mean clients are losing writes or reads. Follow the storage troubleshooting guide.

### Disk almost full

Page when `nimbus_storage_disk_used_ratio` exceeds 0.9 on any node, since writes stop at 0.95.

## Ticket alerts

Ticket alerts open a ticket for the next business day instead of waking anyone up.

- **Under-replicated partitions** for more than an hour: `nimbus_partition_under_replicated > 0`.
- **Dead-letter growth:** more than 100 jobs moved to dead-letter queues in an hour.
- **Compaction backlog** above half of the level where `NMB-5024` starts.
- **Frequent idle evictions:** a high `idle_evicted` rate may mean the grace period is too short for the workload.

## Routing

Label every rule with `severity: page` or `severity: ticket` and route on that label in Alertmanager. Add the `tenant` label to notifications so the on-call engineer can tell whether one tenant or the whole cluster is affected.
""")

add_doc("nimbus-upgrade-guide", "Upgrading Nimbus", "guide", "operations", "2024-06-18", "public", """
Nimbus supports rolling upgrades between patch releases and from one minor release to the next. Skipping a minor release is not supported: to go from v3.2.x to v3.4.x, upgrade to the latest v3.3.x first.

## Before you upgrade

- Read the release notes for every version between your current and target version, especially the upgrade notes and changed defaults.
- Run `nimbusctl cluster check-config --target-version v3.4.2` to find settings that the new version removes or rejects.
- Take a snapshot with `nimbusctl snapshot create`.
- Make sure every partition is fully replicated: `nimbusctl partition list --under-replicated` must return nothing.

## Upgrade order

Upgrade storage nodes first, then schedulers (standbys before the leader), then brokers. Newer storage nodes understand requests from older brokers, but not the other way round.

## Upgrading a node

Repeat this procedure for one node at a time.

### Drain the node

```bash
nimbusctl node drain nimbus-b --drain-timeout 5m
```

Draining stops new work from being assigned to the node and waits for in-flight jobs to finish. Jobs still running when `--drain-timeout` expires are returned to their queues. For storage nodes, draining also moves partition leadership to other replicas.

### Replace the binary

Install the new package and restart the service:

```bash
sudo apt-get install nimbus=3.4.2-1
sudo systemctl restart nimbusd
```

### Return the node to service

Run `nimbusctl node undrain nimbus-b` and wait until `nimbusctl cluster status` shows the node as `healthy` and `nimbusctl partition list --under-replicated` is empty again before moving on to the next node.

## Rolling back

Patch releases can be rolled back with the same procedure. Rolling back a minor release is only possible until the first compaction after the upgrade, because compaction rewrites segments in the new format. If you might need to roll back, set `storage.compaction_interval` to a large value for the duration of the upgrade.
""")

add_doc("nimbus-tenant-admin", "Tenant Administration", "guide", "administration", "2024-04-08", "public", """
Tenants separate teams, applications or customers that share a cluster. Every queue, bucket, token and policy belongs to one tenant, and tokens from one tenant cannot see or touch another tenant's resources. This guide covers the tenant lifecycle for cluster administrators.

## Creating a tenant

```bash
nimbusctl tenant create payments --description "Payments platform"
nimbusctl tenant quota set payments --max-queues 100 --max-storage 500GiB
nimbusctl token create --tenant payments --scope admin --ttl 720h
```

Give the admin token to the team that owns the tenant. They can create their own queues, buckets and narrower tokens from there. Cluster administrators do not need to be involved in day-to-day changes.

## Isolation guarantees

- API requests are authorized against the tenant in the token. A token for `payments` receives `NMB-3004` when it addresses a resource in `analytics`.
- Metrics carry a `tenant` label, so dashboards can be filtered per team.
- Rate limits and quotas are tracked per tenant, so one tenant cannot exhaust the cluster's request budget.

Isolation is logical, not physical: tenants share brokers and storage nodes. Use separate clusters for workloads that require physical separation.

## Suspending a tenant

`nimbusctl tenant suspend payments` rejects all requests from the tenant's tokens with `NMB-3003` while keeping its data. Workers are disconnected. `nimbusctl tenant resume payments` reverses it.

## Deleting a tenant

Deleting a tenant removes all its queues, jobs, buckets and objects and cannot be undone. Objects under a `compliance` retention lock block deletion until the lock expires.

### Step 1: suspend and export

Suspend the tenant so that no new data arrives, then take a final snapshot with `nimbusctl snapshot create --tenant payments --include-objects` in case the data is needed later.

### Step 2: schedule the deletion

Run `nimbusctl tenant delete payments --dry-run` to see what will be removed, then run it again without `--dry-run`. Deletion is scheduled, not immediate: the tenant enters the `deleting` state for 72 hours, during which `nimbusctl tenant delete --cancel payments` restores it. After 72 hours, storage nodes remove the data in the background.
""")

add_doc("nimbus-tenant-quotas", "Tenant Quotas", "reference", "administration", "2024-04-08", "public", """
Quotas cap how much of the cluster a single tenant may use. They protect other tenants from a runaway workload and give capacity planning a fixed upper bound. Quotas are set by cluster administrators with `nimbusctl tenant quota set` or the quotas API.

## Quota types

### max_queues

The number of queues the tenant may have, not counting dead-letter queues. Default: 100.

### max_storage_bytes

The total size of objects and queue payloads stored by the tenant, counted once per object regardless of replication. Default: unlimited.

### max_connected_workers

The number of workers that may be connected at once across all the tenant's queues. Default: 1,000.

### requests_per_minute

The tenant-wide request rate described on the rate limits page. Default: 6,000.

### max_token_ttl

The longest lifetime a token in this tenant may have. Sets `auth.max_token_ttl` for the tenant. Default: unlimited.

## Checking usage

```bash
nimbusctl tenant quota show payments
```

prints each quota next to current usage. The same numbers are exported as `nimbus_tenant_quota_used` and `nimbus_tenant_quota_limit` gauges, so you can alert when a tenant approaches a limit.

## What happens at the limit

Requests that would exceed `max_queues`, `max_storage_bytes` or `max_connected_workers` fail with `NMB-4031` (tenant quota exceeded). Existing resources are never removed to enforce a quota: a tenant whose quota is lowered below its current usage simply cannot create anything new until usage drops. Storage usage is recalculated every five minutes, so a tenant can briefly overshoot `max_storage_bytes` by the amount written in that interval.

The request rate quota is different: requests above `requests_per_minute` are throttled with `NMB-4029` rather than rejected with `NMB-4031`, and they succeed again as soon as the rate drops.

## Soft limits

Each quota can also have a soft limit, set with `--soft`. Crossing a soft limit does not reject anything; it records an audit event and increments `nimbus_tenant_quota_soft_exceeded_total`, which is a good trigger for a conversation with the team before the hard limit bites.
""")

add_doc("nimbus-cli-reference", "nimbusctl Command Reference", "reference", "cli", "2024-05-02", "public", """
`nimbusctl` is the command-line tool for operating Nimbus clusters. It talks to the brokers' API, so it works from any machine that can reach port 7400. It reads the broker address and token from `~/.config/nimbus/config.toml` or from the `NIMBUS_ADDR` and `NIMBUS_TOKEN` environment variables.

## Global flags

- `--addr`: broker address, overriding the configuration file.
- `--tenant`: tenant to operate on. Defaults to the tenant of the token.
- `--output`: `table` (default), `json` or `yaml`.
- `--dry-run`: print what a mutating command would do without doing it. Supported by `tenant delete`, `queue purge`, `node decommission` and `cluster rebalance`.

## Node commands

### nimbusctl node drain

Stops assigning new work to a node and waits for in-flight jobs to finish, so the node can be restarted safely.

- `--drain-timeout <duration>`: how long to wait for in-flight jobs before returning them to their queues. Default: `10m`. A value of `0` waits indefinitely. Values without a unit are read as seconds.
- `--shutdown-timeout <duration>`: after draining, also stop `nimbusd` and wait this long for it to exit. Not set by default, which leaves the process running.
- `--lease-grace <duration>`: extra time granted to leases that are extended during the drain. Default: `30s`.

### nimbusctl node undrain

Returns a drained node to service.

### nimbusctl node decommission

Moves every partition off a storage node and removes it from the cluster. Use before shrinking a cluster. Takes `--drain-timeout` as well.

## Cluster commands

### nimbusctl cluster rebalance

Recomputes partition placement according to `scheduler.placement_strategy`.

- `--force-rebalance`: move partitions now, even if the scheduler's imbalance threshold is not reached and even if a rebalance ran within the last `scheduler.rebalance_interval`. Without it, the command only requests a rebalance check.
- `--max-moves <n>`: limit how many partitions move in one run. Default: `20`.

### nimbusctl cluster check-config

Compares configuration across nodes. With `--target-version`, also reports settings that the given version removes or rejects.

## Queue commands

### nimbusctl queue purge

Deletes waiting jobs. `--older-than <duration>` limits deletion to jobs older than the given age. `--include-dlq` also purges the dead-letter queue.
""")

add_doc("nimbus-retention-policies", "Retention Policies for Jobs and Objects", "guide", "storage", "2024-03-15", "public", """
Nimbus keeps two kinds of data that grow over time: completed jobs and stored objects. Retention settings decide how long each is kept and whether it can be deleted early.

## Completed jobs

Acknowledged jobs are not deleted immediately. They stay queryable through `GET /jobs/{job_id}` for `queue.completed_retention`, which defaults to 24 hours, so that producers can check results and operators can investigate failures. After that, compaction removes them. Dead-letter jobs are kept for `queue.dead_retention`, 14 days by default, because they usually need human attention.

Set both per queue through the queues API overrides. Long completed-job retention is cheap for small payloads but adds up for queues that carry large payloads at high rates.

## Object retention modes

Bucket retention policies prevent objects from being deleted or overwritten for a fixed period after they are written.

### Governance mode

Objects are protected against ordinary deletes and overwrites, but a token with the `admin` scope can remove the protection by sending `X-Nimbus-Bypass-Retention: true`. Use governance mode to guard against accidents.

### Compliance mode

No one can delete or overwrite a protected object until the lock expires, including cluster administrators. The lock can be extended but never shortened; attempts fail with `NMB-6005`. Use compliance mode only when a regulation demands it, because mistakes cannot be undone: an object uploaded with a 10-year lock will occupy storage for 10 years.

## Setting policies

```bash
nimbusctl bucket retention set invoices --mode compliance --duration 7y
nimbusctl bucket retention show invoices
```

The bucket default applies to new objects only. Individual objects can be given a longer lock at upload time with the `X-Nimbus-Retain-Until` header.

## Soft delete

Independently of retention, every bucket has a soft-delete window, 7 days by default. Deleted objects stay recoverable with the undelete endpoint during that window and are removed by compaction afterwards. Soft-deleted data counts toward the tenant's storage quota until it is removed.
""")

add_doc("nimbus-internal-oncall-runbook", "On-call Runbook: Stuck Queues", "troubleshooting", "operations", "2024-05-20", "internal", """
This runbook is for platform on-call engineers responding to the `NimbusJobsWaitingTooLong` page. It assumes access to the operations bastion and a `system` tenant token. Work through the sections in order; most incidents are resolved in the first two.

## Triage

Identify the affected tenant and queue from the alert labels, then check the queue statistics:

```bash
nimbusctl queue stats --tenant <tenant> <queue>
```

Compare `depth`, `inflight` and `inflight_bytes`. If `inflight_bytes` is at `queue.max_inflight_bytes`, the queue is blocked on slow workers, not on Nimbus. If `inflight` is zero and `depth` is growing, no worker is leasing.

## No workers leasing

Run `nimbusctl worker list --queue <queue>`. If the list is empty, check `nimbus_worker_evictions_total` for the tenant. A spike in `heartbeat_timeout` evictions points to the workers' hosts; contact the owning team. If workers are connected but not leasing, check whether the queue has been paused with `nimbusctl queue show`. A paused queue shows `state: paused`; ask the owning team before resuming it, since they may have paused it on purpose.

## Workers leasing but jobs not finishing

Look at `nimbus_queue_dead_total` and the last errors on recent jobs. If every attempt fails with the same error, the problem is in the workers' code and should be handed to the owning team. Do not raise `queue.dead_letter_after` to buy time; it only delays the dead-lettering.

## Storage-side causes

If enqueue or ack calls fail with `NMB-5021` or `NMB-5024`, treat it as a storage incident. Check `nimbus_partition_under_replicated` and disk usage first. For `NMB-5024`, temporarily raising `storage.compaction_max_bytes` on the affected node usually clears the backlog within one compaction interval.

## Escalation

Escalate to the storage team if a storage incident is not improving after 30 minutes. Page the Nimbus development on-call only for suspected bugs, for example an `NMB-5001` with a `trace_id` that repeats, and attach a debug bundle.
""")

# ---------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------
# Identifier queries: the answer hinges on one exact token (error code,
# config key, CLI flag, version). Near-duplicates are deliberate, e.g.
# NMB-4012/NMB-4013/NMB-4014 share a page and wording, NMB-5021/NMB-5022 are
# described almost identically, and codes reappear in several release notes.

add_query("q01", "identifier", "What does error NMB-4013 mean?",
    answers=["combined payload of a batch enqueue request is larger than `queue.max_batch_bytes`"],
    rels=[
        ("nimbus-errors-4xxx", 2, [
            "The combined payload of a batch enqueue request is larger than `queue.max_batch_bytes`. HTTP 413. Every job in the batch may be under the per-message limit and the batch can still be rejected.",
        ]),
        ("nimbus-config-queue", 1, [
            "Batches above this size fail with `NMB-4013`, even if every individual job is under `queue.max_message_bytes`.",
        ]),
    ])

add_query("q02", "identifier", "How do I fix error NMB-5021?",
    answers=["nimbusctl node list", "fix the slow disk"],
    rels=[
        ("nimbus-errors-5xxx", 2, [
            "To fix it, check `nimbusctl node list` for storage nodes that are down or degraded, bring them back, and confirm that the remaining healthy replicas are at least equal to the write quorum.",
        ]),
        ("nimbus-troubleshoot-storage", 1, [
            "When NMB-5021 appears while only one node is down, the usual cause is a second node whose disk is too slow to answer within `storage.replica_timeout`. Check `nimbus_storage_fsync_seconds` for every node and replace or fix the slow disk.",
        ]),
    ])

add_query("q03", "identifier", "What is the default value of queue.max_inflight_bytes?",
    answers=["256MiB"],
    rels=[
        ("nimbus-config-queue", 2, [
            "The total size of job payloads that may be leased but not yet acknowledged, summed across all workers of a single queue. When the limit is reached, brokers stop handing out new leases for that queue until workers acknowledge or release jobs. Default: `256MiB`.",
        ]),
        ("nimbus-release-3-4-0", 1, [
            "`queue.max_inflight_bytes` now defaults to `256MiB` (previously `128MiB`).",
        ]),
    ])

add_query("q04", "identifier", "What does the --drain-timeout flag do?",
    answers=["how long to wait for in-flight jobs before returning them to their queues", "10m"],
    rels=[
        ("nimbus-cli-reference", 2, [
            "`--drain-timeout <duration>`: how long to wait for in-flight jobs before returning them to their queues. Default: `10m`. A value of `0` waits indefinitely. Values without a unit are read as seconds.",
        ]),
        ("nimbus-upgrade-guide", 1, [
            "Jobs still running when `--drain-timeout` expires are returned to their queues.",
        ]),
    ])

add_query("q05", "identifier", "Which write quorum bug was fixed in v3.4.1?",
    answers=["two replicas had already confirmed the write"],
    rels=[
        ("nimbus-release-3-4-1", 2, [
            "Fixed brokers reporting `NMB-5021` (write quorum not reached) when a third replica answered after `storage.replica_timeout` even though two replicas had already confirmed the write.",
        ]),
        ("nimbus-troubleshoot-storage", 1, [
            "Before v3.4.1, a bug could report NMB-5021 when a replica answered just after the timeout even though the write had been acknowledged by two replicas.",
        ]),
        ("nimbus-release-3-4-0", 1, [
            "Under heavy write load, brokers may occasionally report `NMB-5021` for writes that were in fact acknowledged by a quorum. Fixed in v3.4.1.",
        ]),
    ])

add_query("q06", "identifier", "What does NMB-6004 indicate?",
    answers=["protected by a retention policy"],
    rels=[
        ("nimbus-errors-6xxx", 2, [
            "The object is protected by a retention policy and cannot be deleted or overwritten until its lock expires. HTTP 409. The response includes the `locked_until` timestamp.",
        ]),
    ])

add_query("q07", "identifier", "What causes NMB-3007 and how do I resolve it?",
    answers=["signed with a key the broker does not recognize", "Reissue the token from the current cluster"],
    rels=[
        ("nimbus-errors-3xxx", 2, [
            "The token was signed with a key the broker does not recognize, either because that key has been retired or because the token was issued by a different cluster. HTTP 401. Reissue the token from the current cluster.",
        ]),
        ("nimbus-auth-tokens", 1, [
            "Tokens signed with a retired key are rejected with `NMB-3007`, so check the audit log for recent use of the old key before retiring it.",
        ]),
    ])

add_query("q08", "identifier", "What does scheduler.heartbeat_misses control?",
    answers=["declares it dead and releases its leases"],
    rels=[
        ("nimbus-config-scheduler", 2, [
            "How many consecutive heartbeats a worker may miss before the scheduler declares it dead and releases its leases. Default: `3`.",
        ]),
        ("nimbus-troubleshoot-workers", 1, [
            "The worker missed `scheduler.heartbeat_misses` consecutive heartbeats.",
        ]),
    ])

add_query("q09", "identifier", "What does the --force-rebalance option do?",
    answers=["move partitions now", "moves partitions immediately"],
    rels=[
        ("nimbus-cli-reference", 2, [
            "`--force-rebalance`: move partitions now, even if the scheduler's imbalance threshold is not reached and even if a rebalance ran within the last `scheduler.rebalance_interval`.",
        ]),
        ("nimbus-release-3-4-0", 1, [
            "**Forced rebalancing** with `nimbusctl cluster rebalance --force-rebalance`, which moves partitions immediately instead of waiting for the next `scheduler.rebalance_interval`.",
        ]),
    ])

add_query("q10", "identifier", "I get NMB-4012 when enqueuing a job. What is wrong?",
    answers=["larger than `queue.max_message_bytes`"],
    rels=[
        ("nimbus-errors-4xxx", 2, [
            "A single job payload is larger than `queue.max_message_bytes`. HTTP 413. Move large data into an object and put the object key in the job instead, or raise the limit for the queue.",
        ]),
        ("nimbus-config-queue", 1, [
            "The largest payload accepted for a single job. Enqueue requests above this size fail with `NMB-4012`. Default: `1MiB`. Maximum: `16MiB`.",
        ]),
    ])

add_query("q11", "identifier", "When is NMB-4031 returned?",
    answers=["tenant quota exceeded", "over one of its quotas"],
    rels=[
        ("nimbus-tenant-quotas", 2, [
            "Requests that would exceed `max_queues`, `max_storage_bytes` or `max_connected_workers` fail with `NMB-4031` (tenant quota exceeded).",
        ]),
        ("nimbus-errors-4xxx", 1, [
            "The request would take the tenant over one of its quotas for queues, stored bytes or connected workers. HTTP 403. Ask a cluster administrator to raise the quota, or delete unused resources.",
        ]),
    ])

add_query("q12", "identifier", "Which release introduced the queue.dedupe_window setting?",
    answers=["v3.3.0"],
    rels=[
        ("nimbus-release-3-3-0", 2, [
            "**Deduplication keys.** Producers can attach a `dedupe_key` to a job. A second job with the same key within `queue.dedupe_window` (default `5m`) is rejected with the new error `NMB-4011`, and the response includes the ID of the original job.",
        ]),
        ("nimbus-config-queue", 1, [
            "Set to `0s` to disable deduplication. Default: `5m`. Introduced in v3.3.0.",
        ]),
    ])

# Paraphrase queries: worded with different vocabulary than the evidence.

add_query("q13", "paraphrase", "Why do my background processes get killed when nothing is happening?",
    answers=["The scheduler evicts idle workers after the grace period"],
    rels=[
        ("nimbus-troubleshoot-workers", 2, [
            "The scheduler evicts idle workers after the grace period. A worker counts as idle when it holds an open session but has not leased a job for longer than `scheduler.idle_grace_period`, which defaults to 300 seconds.",
        ]),
        ("nimbus-config-scheduler", 1, [
            "How long a worker may hold a session without leasing any job before the scheduler evicts it. Eviction closes the worker's session and frees its slot for other workers.",
        ]),
    ])

add_query("q14", "paraphrase", "How do I safeguard against losing the entire deployment, not just one machine?",
    answers=["Snapshots"],
    rels=[
        ("nimbus-backup-restore", 2, [
            "replication does not help against operator mistakes, bugs or the loss of a whole cluster. Snapshots fill that gap. A snapshot is a consistent copy of queue partitions, object metadata and, optionally, object data, written to an external location.",
        ]),
    ])

add_query("q15", "paraphrase", "My app keeps getting throttled. How often may a single credential call the service?",
    answers=["600 requests per minute"],
    rels=[
        ("nimbus-rate-limits", 2, [
            "| Per token | 600 requests per minute | 100 requests |\n| Per tenant | 6,000 requests per minute | 1,000 requests |",
        ]),
        ("nimbus-errors-4xxx", 1, [
            "The token or tenant has exceeded its request rate. HTTP 429. Wait for the number of seconds given in the `Retry-After` header before retrying.",
        ]),
    ])

add_query("q16", "paraphrase", "How do I give a new department a walled-off area so they can't peek at other departments' work?",
    answers=["Tenants"],
    rels=[
        ("nimbus-tenant-admin", 2, [
            "Tenants separate teams, applications or customers that share a cluster. Every queue, bucket, token and policy belongs to one tenant, and tokens from one tenant cannot see or touch another tenant's resources.",
        ]),
    ])

add_query("q17", "paraphrase", "Can employees log into the web interface with their existing company accounts instead of separate passwords?",
    answers=["OpenID Connect"],
    rels=[
        ("nimbus-auth-sso", 2, [
            "Starting with v3.4.0, people can sign in to the Nimbus admin console and obtain short-lived tokens through an external identity provider using OpenID Connect.",
        ]),
        ("nimbus-release-3-4-0", 1, [
            "**Single sign-on** for the admin console through OpenID Connect, with identity-provider groups mapped to tenants and scopes.",
        ]),
    ])

add_query("q18", "paraphrase", "Which number shows how long the stalest piece of work has been stuck before anybody grabbed it?",
    answers=["nimbus_queue_oldest_waiting_seconds", "oldest_waiting_age"],
    rels=[
        ("nimbus-monitoring-metrics", 2, [
            "`nimbus_queue_oldest_waiting_seconds` (gauge): age of the oldest waiting job. This is usually a better alert signal than depth, because it reflects how long users actually wait.",
        ]),
        ("nimbus-api-queues", 1, [
            "`oldest_waiting_age`: age of the oldest waiting job, in seconds.",
        ]),
    ])

add_query("q19", "paraphrase", "Can someone be woken up automatically at night when work starts piling up?",
    answers=["on-call engineer"],
    rels=[
        ("nimbus-monitoring-alerts", 2, [
            "Paging alerts are routed to the on-call engineer at any hour through your paging integration.",
            "Fires when any queue has had a job waiting for more than 15 minutes for ten minutes in a row.",
        ]),
    ])

add_query("q20", "paraphrase", "Why do my consumers get disconnected after about a minute of silence when there is a proxy in between?",
    answers=["60 seconds", "poll_wait"],
    rels=[
        ("nimbus-troubleshoot-connectivity", 2, [
            "Many load balancers close idle TCP connections after 60 seconds. Workers that long-poll for jobs may appear to hang and then fail with a connection reset. Either raise the idle timeout on the load balancer above the long-poll duration, or lower the client's `poll_wait` setting to 50 seconds or less.",
        ]),
    ])

add_query("q21", "paraphrase", "Is there a way to abort a task that a worker is already in the middle of processing?",
    answers=["canceling"],
    rels=[
        ("nimbus-api-jobs", 2, [
            "Canceling a job that a worker is currently running marks it as `canceling`: the worker's next extend or acknowledge call fails with `NMB-4018`, which tells a well-behaved worker to stop.",
        ]),
    ])

add_query("q22", "paraphrase", "Can I leap over an intermediate version when bringing my installation up to date?",
    answers=["Skipping a minor release is not supported"],
    rels=[
        ("nimbus-upgrade-guide", 2, [
            "Skipping a minor release is not supported: to go from v3.2.x to v3.4.x, upgrade to the latest v3.3.x first.",
        ]),
        ("nimbus-release-3-4-0", 1, [
            "Upgrading from v3.2.x requires going through v3.3.x first. Remove `storage.sync_mode` from all configurations before upgrading, or nodes will refuse to start.",
        ]),
    ])

add_query("q23", "paraphrase", "Is there a way to make sure the access keys people generate stop working after a while?",
    answers=["auth.max_token_ttl", "--ttl"],
    rels=[
        ("nimbus-auth-tokens", 2, [
            "The `--ttl` flag sets the lifetime. Tokens without a TTL never expire, which is convenient for experiments but risky in production. Administrators can enforce an upper bound for a tenant with the `auth.max_token_ttl` setting; requests to create a token with a longer or missing TTL are then refused.",
        ]),
        ("nimbus-tenant-quotas", 1, [
            "The longest lifetime a token in this tenant may have. Sets `auth.max_token_ttl` for the tenant. Default: unlimited.",
        ]),
    ])

add_query("q24", "paraphrase", "Why does everything turn sluggish for a few minutes right as each new hour begins?",
    answers=["Compaction", "storage.compaction_jitter"],
    rels=[
        ("nimbus-troubleshoot-latency", 2, [
            "Compaction is the most common cause. By default, storage nodes compact every hour and the runs are aligned to the wall clock, so every node in the cluster rewrites segment files at the same minute.",
        ]),
        ("nimbus-config-storage", 1, [
            "Compaction runs are aligned to the wall clock, so with the default every node starts compacting at the top of each hour. Set `storage.compaction_jitter` to spread runs out.",
        ]),
    ])

# Cross-section queries: the primary evidence span runs across a heading.

add_query("q25", "cross-section", "What must be set up on a fresh cluster before restoring a snapshot, and which command performs the restore?",
    answers=["nimbusctl snapshot restore", "do not create any queues or buckets"],
    rels=[
        ("nimbus-backup-restore", 2, [
            "Create the tenants you want to restore, but do not create any queues or buckets in them. Point the new cluster's `[backup]` table at the same target so it can read the snapshot list.\n\n### Run the restore\n\nList available snapshots with `nimbusctl snapshot list`, then start the restore:\n\n```bash\nnimbusctl snapshot restore --name nightly-2024-05-10 --tenant analytics\n```",
        ]),
    ])

add_query("q26", "cross-section", "During an upgrade, what happens to jobs still running when the drain finishes, and what is the next step after draining?",
    answers=["returned to their queues", "sudo systemctl restart nimbusd"],
    rels=[
        ("nimbus-upgrade-guide", 2, [
            "Jobs still running when `--drain-timeout` expires are returned to their queues. For storage nodes, draining also moves partition leadership to other replicas.\n\n### Replace the binary\n\nInstall the new package and restart the service:\n\n```bash\nsudo apt-get install nimbus=3.4.2-1\nsudo systemctl restart nimbusd\n```",
        ]),
    ])

add_query("q27", "cross-section", "How long should a Helm install of Nimbus take, and how do I confirm it succeeded?",
    answers=["five to ten minutes", "nimbusctl cluster status"],
    rels=[
        ("nimbus-install-kubernetes", 2, [
            "Each storage pod must join the cluster and finish its initial partition sync before the next one is created, so a three-replica install typically takes five to ten minutes. Do not interrupt the rollout while pods are still joining.\n\n## Verify the installation\n\nOnce the last storage pod reports ready, open a shell in any broker pod and run `nimbusctl cluster status`.",
        ]),
    ])

add_query("q28", "cross-section", "When rotating the token signing key, what do I do once the new key has reached every broker?",
    answers=["nimbusctl auth key promote"],
    rels=[
        ("nimbus-auth-tokens", 2, [
            "Brokers now accept tokens signed by either key but still sign new tokens with the old one. Wait until `nimbusctl auth key list` shows the new key on every broker.\n\n### Phase 2: switch and retire\n\nRun `nimbusctl auth key promote <key-id>` to make the new key the signing key.",
        ]),
        ("nimbus-release-3-4-0", 1, [
            "**Signing key rotation** with `nimbusctl auth key add`, `promote` and `retire`.",
        ]),
    ])

add_query("q29", "cross-section", "In a regional failover, what happens after the old primary has been fenced off?",
    answers=["nimbusctl replication promote"],
    rels=[
        ("nimbus-disaster-recovery", 2, [
            "Fencing makes every primary broker refuse writes, so that clients cannot write to both clusters at once. If the primary is unreachable, skip this step and ask the network team to withdraw the primary's DNS records instead.\n\n### Step 2: promote the standby\n\nRun `nimbusctl replication promote` on the standby.",
        ]),
    ])

add_query("q30", "cross-section", "What are the steps to permanently remove a tenant, from suspending it to scheduling the deletion?",
    answers=["take a final snapshot", "nimbusctl tenant delete payments --dry-run"],
    rels=[
        ("nimbus-tenant-admin", 2, [
            "Suspend the tenant so that no new data arrives, then take a final snapshot with `nimbusctl snapshot create --tenant payments --include-objects` in case the data is needed later.\n\n### Step 2: schedule the deletion\n\nRun `nimbusctl tenant delete payments --dry-run` to see what will be removed, then run it again without `--dry-run`.",
        ]),
    ])

add_query("q31", "cross-section", "How do I move a storage node's objects from local disk to S3, and when do I change the backend setting?",
    answers=["nimbusctl storage migrate start", "reports `copied`"],
    rels=[
        ("nimbus-troubleshoot-storage", 2, [
            "Then start the copy with `nimbusctl storage migrate start --node <node>`; it copies existing objects in the background while the node keeps serving.\n\n### Switch the node\n\nWhen `nimbusctl storage migrate status` reports `copied`, set `storage.backend = \"s3\"` on that node and restart it.",
        ]),
        ("nimbus-config-storage", 1, [
            "Changing the backend on an existing cluster requires a migration; see the storage troubleshooting guide.",
        ]),
    ])

add_query("q32", "cross-section", "An alert says work has been waiting too long and nothing seems to be picking it up. What should on-call check?",
    answers=["nimbusctl worker list", "no worker is leasing"],
    rels=[
        ("nimbus-internal-oncall-runbook", 2, [
            "If `inflight` is zero and `depth` is growing, no worker is leasing.\n\n## No workers leasing\n\nRun `nimbusctl worker list --queue <queue>`. If the list is empty, check `nimbus_worker_evictions_total` for the tenant.",
        ]),
    ])

# Unanswerable queries: no qrels and no spans (counted as unlabeled).

add_query("q33", "unanswerable", "What is the monthly price of the Nimbus enterprise support plan?")
add_query("q34", "unanswerable", "Does Nimbus offer a GraphQL endpoint for querying jobs?")


# ---------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------

def locate(text, evidence, doc_id, qid):
    """Return (start, end) of an evidence item inside ``text``."""
    if isinstance(evidence, tuple):
        needle, occurrence = evidence
    else:
        needle, occurrence = evidence, None
    positions = []
    pos = text.find(needle)
    while pos != -1:
        positions.append(pos)
        pos = text.find(needle, pos + 1)
    assert positions, "%s: evidence not found in %s: %r" % (qid, doc_id, needle[:80])
    if occurrence is None:
        assert len(positions) == 1, "%s: evidence occurs %d times in %s: %r" % (
            qid, len(positions), doc_id, needle[:80])
        start = positions[0]
    else:
        assert 0 <= occurrence < len(positions), (qid, doc_id, occurrence)
        start = positions[occurrence]
    end = start + len(needle)
    assert text[start:end] == needle
    return start, end


def validate_docs():
    ids = [d["_id"] for d in DOCS]
    assert len(ids) == len(set(ids)), "duplicate doc ids"
    for d in DOCS:
        text = d["text"]
        meta = d["metadata"]
        assert meta["doc_type"] in DOC_TYPES, d["_id"]
        assert meta["tenant"] in ("public", "internal"), d["_id"]
        assert len(meta["date"]) == 10 and meta["date"][4] == "-" and meta["date"][7] == "-"
        assert not text.startswith("# "), "%s: text must not start with a title" % d["_id"]
        assert d["title"] not in text.split("\n", 1)[0], "%s: title repeated" % d["_id"]
        n_words = len(text.split())
        assert MIN_WORDS <= n_words <= MAX_WORDS, "%s has %d words" % (d["_id"], n_words)
        assert "\n## " in text, "%s: no level-2 heading" % d["_id"]


def build_labels():
    docs_by_id = {d["_id"]: d for d in DOCS}
    qids = [q["_id"] for q in QUERIES]
    assert qids == ["q%02d" % i for i in range(1, len(QUERIES) + 1)], qids
    qrels, spans = [], []
    for q in QUERIES:
        assert q["class"] in QUERY_CLASSES, q["_id"]
        if q["class"] == "unanswerable":
            assert not q["rels"] and not q["answers"], q["_id"]
            continue
        assert q["rels"] and 1 <= len(q["answers"]) <= 3, q["_id"]
        assert any(rel == 2 for _, rel, _ in q["rels"]), q["_id"]
        span_texts = []
        crosses_heading = False
        seen_docs = set()
        for doc_id, relevance, evidences in q["rels"]:
            assert doc_id in docs_by_id, (q["_id"], doc_id)
            assert doc_id not in seen_docs, (q["_id"], doc_id)
            assert relevance in (1, 2), (q["_id"], doc_id)
            assert evidences, (q["_id"], doc_id)
            seen_docs.add(doc_id)
            text = docs_by_id[doc_id]["text"]
            qrels.append((q["_id"], doc_id, relevance))
            located = []
            for ev in evidences:
                start, end = locate(text, ev, doc_id, q["_id"])
                assert MIN_SPAN <= end - start <= MAX_SPAN, (q["_id"], doc_id, end - start)
                located.append((start, end))
                span_texts.append(text[start:end])
                if "\n## " in text[start:end] or "\n### " in text[start:end]:
                    crosses_heading = True
            located.sort()
            for (s1, e1), (s2, e2) in zip(located, located[1:]):
                assert e1 <= s2, "%s: overlapping spans in %s" % (q["_id"], doc_id)
            for start, end in located:
                spans.append(
                    {"query_id": q["_id"], "doc_id": doc_id, "start": start, "end": end,
                     "relevance": relevance}
                )
        for ans in q["answers"]:
            assert any(ans in s for s in span_texts), "%s: answer %r not in spans" % (q["_id"], ans)
        if q["class"] == "cross-section":
            assert crosses_heading, "%s: no span crosses a heading" % q["_id"]
    return qrels, spans


def write_text(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(content)


def jsonl(rows):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def readme(class_counts, n_docs, n_qrels, n_spans, doc_type_counts):
    lines = [
        "# Demo dataset: Nimbus documentation",
        "",
        "A small bundled retrieval benchmark for ragbench. The corpus is the technical",
        "documentation of **Nimbus**, a fictional distributed job-queue and object storage",
        "service: installation, configuration references, authentication, error code",
        "references, troubleshooting guides, dated release notes, API pages, rate limits,",
        "backup/restore, monitoring, upgrades and tenant administration.",
        "",
        "All text is synthetic and was written for this project. It is distributed under the",
        "same license as ragbench (MIT). Any resemblance to a real product is coincidental.",
        "",
        "## Contents",
        "",
        "- %d documents (%s), each 250-900 words of markdown." % (
            n_docs, ", ".join("%s: %d" % kv for kv in sorted(doc_type_counts.items()))),
        "- %d queries, %d qrels lines, %d evidence spans." % (
            sum(class_counts.values()), n_qrels, n_spans),
        "",
        "| Query class | Count | What it tests |",
        "|---|---|---|",
        "| identifier | %d | Answer hinges on an exact token (`NMB-4013`, `queue.max_inflight_bytes`, `--drain-timeout`, `v3.4.1`). Near-identical codes are described in similar words on the same page and recur in release notes. |" % class_counts["identifier"],
        "| paraphrase | %d | Query vocabulary differs from the document's (low lexical overlap). |" % class_counts["paraphrase"],
        "| cross-section | %d | The primary evidence span crosses a markdown heading, so chunkers that split on headings cut it. |" % class_counts["cross-section"],
        "| unanswerable | %d | No relevant documents, no qrels, no spans: the query is unlabeled. |" % class_counts["unanswerable"],
        "",
        "Relevance is graded: 2 = primary answer, 1 = partially relevant. Several queries",
        "have more than one relevant document.",
        "",
        "## Files",
        "",
        "BEIR layout plus two extras:",
        "",
        "- `corpus.jsonl`: `{\"_id\", \"title\", \"text\", \"metadata\": {\"doc_type\", \"product_area\", \"date\", \"tenant\"}}`, sorted by `_id`. `text` is markdown and does not repeat the title.",
        "- `queries.jsonl`: `{\"_id\", \"text\", \"metadata\": {\"class\", \"answers\"}}`. `answers` holds short gold strings that occur verbatim in an evidence span (empty for unanswerable queries).",
        "- `qrels/test.tsv`: header `query-id<TAB>corpus-id<TAB>score`, then one line per relevant (query, document) pair.",
        "- `spans/test.jsonl`: `{\"query_id\", \"doc_id\", \"start\", \"end\", \"relevance\"}`, character offsets `[start, end)` into the document's `text`. Every qrel has at least one span; spans of the same pair do not overlap.",
        "",
        "## Regenerating",
        "",
        "`build_demo.py` is the source of truth: documents and queries are Python data, and",
        "evidence spans are exact quoted substrings that the script locates and converts to",
        "offsets (with consistency checks). From the repository root:",
        "",
        "```bash",
        "python3 datasets/demo/build_demo.py",
        "```",
        "",
        "The output is deterministic; re-running reproduces every file byte-for-byte,",
        "including this README.",
        "",
    ]
    return "\n".join(lines)


def main():
    validate_docs()
    qrels, spans = build_labels()

    corpus = [
        OrderedDict([("_id", d["_id"]), ("title", d["title"]), ("text", d["text"]),
                     ("metadata", d["metadata"])])
        for d in sorted(DOCS, key=lambda d: d["_id"])
    ]
    queries = [
        OrderedDict([("_id", q["_id"]), ("text", q["text"]),
                     ("metadata", OrderedDict([("class", q["class"]), ("answers", q["answers"])]))])
        for q in QUERIES
    ]
    qrels_tsv = "query-id\tcorpus-id\tscore\n" + "".join(
        "%s\t%s\t%d\n" % row for row in qrels)

    class_counts = Counter(q["class"] for q in QUERIES)
    doc_type_counts = Counter(d["metadata"]["doc_type"] for d in DOCS)

    write_text(os.path.join(HERE, "corpus.jsonl"), jsonl(corpus))
    write_text(os.path.join(HERE, "queries.jsonl"), jsonl(queries))
    write_text(os.path.join(HERE, "qrels", "test.tsv"), qrels_tsv)
    write_text(os.path.join(HERE, "spans", "test.jsonl"), jsonl(spans))
    write_text(os.path.join(HERE, "README.md"),
               readme(class_counts, len(DOCS), len(qrels), len(spans), doc_type_counts))

    print("docs=%d queries=%d qrels=%d spans=%d classes=%s" % (
        len(DOCS), len(QUERIES), len(qrels), len(spans),
        dict(sorted(class_counts.items()))))


if __name__ == "__main__":
    main()
