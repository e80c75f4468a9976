"""prod against its apply-tested peers, field by field: every difference is one the README explains.

The peers (``tests/reference/peers/``, each with a ``SOURCE.md``) deploy the same shape, two
``ct6e-standard-4t`` 4x4 slices on GKE: cluster-toolkit's ``gke-tpu-v6e`` blueprint at a pinned
commit, and ``xpk cluster create --dry-run`` of xpk 1.16.0. Their ``plan.json`` files hold every
field as ``{"value", "from", "note"?}``.

Both sides are normalised into one flat map of the same keys (``cluster.releaseChannel``,
``nodePool.maxPodsPerNode``, ``firewall.sourceIsOwnSubnet``...), so that equal meanings compare
equal: gcloud scope aliases become URLs and ``cloud-platform`` covers every other scope, an unset
field takes the default GKE or GCE gives it where that default is documented, a peer's
``--enable-dataplane-v2`` is ``ADVANCED_DATAPATH``. A field is compared only where both sides have
it (a peer without secondary networks has no DCN firewall to compare). Names and project
placeholders are never compared. For each peer the TPU pools are compared with the variant that
matches prod best (prod: fixed on-demand pools of a whole slice each).

:func:`differences` gives the ids (``<peer>:<key>``); the README's table under "### Compared with
the peers" must list exactly these (:func:`readme_peer_table`), each with its reason.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import documentation

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = ROOT / "tests" / "reference" / "peers"

PEER_SECTION = "### Compared with the peers"
PEER_NAMES = ("cluster-toolkit", "xpk")

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
NETWORK = "gcp:compute/network:Network"
SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
ROUTER = "gcp:compute/router:Router"
ROUTER_NAT = "gcp:compute/routerNat:RouterNat"
DRANET_LABEL = "cloud.google.com/gke-networking-dra-driver"
IAP_RANGE = ipaddress.ip_network("35.235.240.0/20")  # Identity-Aware Proxy's TCP forwarding

# ----------------------------------------------------------------------------------- defaults
# What GKE or GCE gives a field left unset (documented defaults), so an unset field compares with a
# peer that spells the default out.
GKE_DEFAULT_IMAGE = "COS_CONTAINERD"  # GKE Standard's default node image
GKE_DEFAULT_DISK_GB = 100  # gcloud/GKE boot disk size
GKE_DEFAULT_MAX_PODS = 110  # GKE Standard's default maximum pods per node (a /24 per node)
GCE_DEFAULT_ROUTING_MODE = "REGIONAL"  # `gcloud compute networks create` without --bgp-routing-mode
# Shielded VM options of a node pool that sets none (GKE API NodeConfig.shieldedInstanceConfig defaults).
GKE_DEFAULT_SHIELDED = {"enableSecureBoot": False, "enableIntegrityMonitoring": True}
UNSET = "unset (GKE default)"
# GKE add-ons: on by default or not (the Compute Engine persistent disk CSI driver is on in new clusters).
ADDON_DEFAULTS = {
    "gcsFuseCsiDriver": False, "rayOperator": False, "gcePersistentDiskCsiDriver": True,
    "gcpFilestoreCsiDriver": False, "parallelstoreCsiDriver": False, "lustreCsiDriver": False,
    "nodeLocalDnsCache": False,
}
# Our addonsConfig key for each add-on the peers list.
ADDON_INPUTS = {
    "gcsFuseCsiDriver": "gcsFuseCsiDriverConfig", "gcePersistentDiskCsiDriver": "gcePersistentDiskCsiDriverConfig",
    "gcpFilestoreCsiDriver": "gcpFilestoreCsiDriverConfig", "parallelstoreCsiDriver": "parallelstoreCsiDriverConfig",
    "lustreCsiDriver": "lustreCsiDriverConfig", "nodeLocalDnsCache": "dnsCacheConfig",
}

# gcloud's --scopes aliases (`gcloud container node-pools create --help`).
SCOPE = "https://www.googleapis.com/auth/"
SCOPE_ALIASES = {
    "bigquery": ["bigquery"], "cloud-platform": ["cloud-platform"], "cloud-source-repos": ["source.full_control"],
    "cloud-source-repos-ro": ["source.read_only"], "compute-ro": ["compute.readonly"], "compute-rw": ["compute"],
    "datastore": ["datastore"], "logging-write": ["logging.write"], "monitoring": ["monitoring"],
    "monitoring-read": ["monitoring.read"], "monitoring-write": ["monitoring.write"], "pubsub": ["pubsub"],
    "service-control": ["servicecontrol"], "service-management": ["service.management.readonly"],
    "sql-admin": ["sqlservice.admin"], "storage-full": ["devstorage.full_control"],
    "storage-ro": ["devstorage.read_only"], "storage-rw": ["devstorage.read_write"], "taskqueue": ["taskqueue"],
    "trace": ["trace.append"], "userinfo-email": ["userinfo.email"],
    "gke-default": ["devstorage.read_only", "logging.write", "monitoring", "service.management.readonly",
                    "servicecontrol", "trace.append"],
}


# ----------------------------------------------------------------------------------- helpers


def unwrap(node: Any) -> Any:
    """A peer plan without its provenance: each ``{"value", "from", "note"?}`` becomes its value."""
    if isinstance(node, dict):
        if "value" in node and "from" in node and set(node) <= {"value", "from", "note"}:
            return unwrap(node["value"])
        return {k: unwrap(v) for k, v in node.items()}
    if isinstance(node, list):
        return [unwrap(v) for v in node]
    return node


def peer_plan(peer: str) -> dict[str, Any]:
    return unwrap(json.loads((PEERS_DIR / peer / "plan.json").read_text()))


def dig(obj: Any, *path: str | int, default: Any = None) -> Any:
    for p in path:
        if isinstance(obj, dict) and isinstance(p, str):
            obj = obj.get(p)
        elif isinstance(obj, list) and isinstance(p, int) and p < len(obj):
            obj = obj[p]
        else:
            return default
        if obj is None:
            return default
    return obj


def number(v: Any) -> int | None:
    """Mocks hand numbers back as floats."""
    return None if v is None else int(v)


def scopes(values: Iterable[str] | None) -> tuple[str, ...]:
    """OAuth scopes as the VM gets them: aliases expanded; ``cloud-platform`` already grants every other one."""
    out: set[str] = set()
    for s in values or ():
        s = s.strip('"')
        out.update(s if s.startswith("https://") else SCOPE + a for a in SCOPE_ALIASES.get(s, [s]))
    return (SCOPE + "cloud-platform",) if SCOPE + "cloud-platform" in out else tuple(sorted(out))


def datapath(v: Any) -> str:
    return "ADVANCED_DATAPATH" if v in ("ADVANCED_DATAPATH", "--enable-dataplane-v2") else "LEGACY_DATAPATH"


def version_choice(version: str | None) -> str:
    """The version GKE creates the control plane at, in words: an exact ``1.35.2-gke.1842000`` is that version (and
    fails once the patch leaves the channel); the API's alias ``1.35`` and cluster-toolkit's ``version_prefix``
    ``1.35.`` (the newest channel version matching it) both pick the newest 1.35 patch; no number: the channel's
    default. An exact pin and a prefix are different choices and compare different."""
    v = version or ""
    if re.fullmatch(r"\d+\.\d+\.\d+-gke\.\d+", v):
        return f"exactly {v}"
    m = re.fullmatch(r"(\d+\.\d+(?:\.\d+)?)\.?", v)
    return f"newest {m.group(1)} patch" if m else "channel default"


def location_type(location: str) -> str:
    return "ZONAL" if re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", location) else "REGIONAL"


def node_version(v: str | None) -> str:
    """No version, or the control plane's own (gcloud's --node-version=<master version> at creation): the same pool."""
    if v is None or "master version" in v:
        return "cluster version"
    return v


def service_account(email: str | None) -> str:
    if not email or email == "default" or email.endswith("-compute@developer.gserviceaccount.com"):
        return "Compute Engine default"
    return "dedicated"


def reservation(affinity: Any) -> str:
    if affinity is None:
        return "unset (any matching reservation, else on-demand)"
    if isinstance(affinity, str):
        return {"none": "NO_RESERVATION", "any": "ANY_RESERVATION", "specific": "SPECIFIC_RESERVATION"}[affinity]
    kind = affinity.get("consumeReservationType") or affinity.get("type")
    return {"specific": "SPECIFIC_RESERVATION", "any": "ANY_RESERVATION", "none": "NO_RESERVATION"}.get(kind, kind)


def autoscaling(a: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Per-zone (``min/maxNodeCount``, gcloud ``--min/--max-nodes``) or total limits, and the location policy."""
    if not a or a.get("enabled") is False:
        return None
    out: dict[str, Any] = {}
    per_zone_max = a.get("maxNodeCount", a.get("maxNodes"))
    if per_zone_max is not None:
        out["perZone"] = {"min": number(a.get("minNodeCount", a.get("minNodes", 0))), "max": number(per_zone_max)}
    if a.get("totalMaxNodeCount") is not None:
        out["total"] = {"min": number(a.get("totalMinNodeCount", 0)), "max": number(a["totalMaxNodeCount"])}
    if a.get("locationPolicy"):
        out["locationPolicy"] = a["locationPolicy"]
    return out


def _size(count: int | None, scaling: Mapping[str, Any] | None, initial: int | None) -> int | str | None:
    """A fixed pool's node count; an autoscaled pool has none, only a size it starts at."""
    if autoscaling(scaling):
        return "autoscaled" if initial is None else f"autoscaled, {initial} at creation"
    return count


def taints(ts: Iterable[Mapping[str, Any]] | None) -> tuple[str, ...]:
    return tuple(sorted(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in ts or ()))


def placement(p: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return {k: v for k, v in p.items() if v is not None} if p else None


def compact(d: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return {k: v for k, v in d.items() if v is not None} if d else None


def chips_per_host(machine_type: str) -> int:
    return int(re.search(r"-(\d+)t$", machine_type).group(1))


def maintenance_window(recurrence: str, start: str) -> str:
    freq = re.search(r"FREQ=(\w+)", recurrence).group(1)
    days = re.search(r"BYDAY=([\w,]+)", recurrence)
    return f"{freq}{' ' + days.group(1) if days else ''} from {start} UTC"


# ----------------------------------------------------------------------------------- ours


def _pool(p: Mapping[str, Any], private_nodes: bool) -> dict[str, Any]:
    """One of our node pools as the peers' plan.json keys."""
    nc = p.get("nodeConfig") or {}
    nets = dig(p, "networkConfig", "additionalNodeNetworkConfigs", default=[])
    return {
        "machineType": nc["machineType"],
        # A pool of a zonal cluster is in the cluster's zone unless it names node locations.
        "zones": len(p.get("nodeLocations") or [p["location"]]),
        "placementPolicy": placement(p.get("placementPolicy")),
        "nodeCount": _size(number(p.get("nodeCount")), p.get("autoscaling"), number(p.get("initialNodeCount"))),
        "autoscaling": autoscaling(p.get("autoscaling")),
        "reservationAffinity": reservation(nc.get("reservationAffinity")),
        "spot": bool(nc.get("spot")),
        "flexStart": bool(nc.get("flexStart")),
        "queuedProvisioning": bool(dig(p, "queuedProvisioning", "enabled")),
        "additionalNetworks": len(nets),
        "acceleratorNetworkProfile": dig(p, "networkConfig", "acceleratorNetworkProfile"),
        "dranetLabel": (nc.get("labels") or {}).get(DRANET_LABEL) == "true",
        "privateNodes": dig(p, "networkConfig", "enablePrivateNodes", default=private_nodes),
        "version": node_version(p.get("version")),
        "autoUpgrade": dig(p, "management", "autoUpgrade", default=True),
        "autoRepair": dig(p, "management", "autoRepair", default=True),
        "upgradeSettings": compact(p.get("upgradeSettings")) or UNSET,
        "imageType": (nc.get("imageType") or GKE_DEFAULT_IMAGE).upper(),
        "gvnic": bool(dig(nc, "gvnic", "enabled")),
        "diskType": nc.get("diskType") or UNSET,
        "diskSizeGb": number(nc.get("diskSizeGb")) or GKE_DEFAULT_DISK_GB,
        "serviceAccount": service_account(nc.get("serviceAccount")),
        "oauthScopes": scopes(nc.get("oauthScopes")),
        "workloadMetadataMode": dig(nc, "workloadMetadataConfig", "mode", default=UNSET),
        "taints": taints(nc.get("taints")),
        "shieldedInstance": {**GKE_DEFAULT_SHIELDED, **(nc.get("shieldedInstanceConfig") or {})},
        "hostMaintenanceInterval": dig(nc, "hostMaintenancePolicy", "maintenanceInterval", default=UNSET),
        "maxPodsPerNode": number(p.get("maxPodsPerNode")) or GKE_DEFAULT_MAX_PODS,
        "threadsPerCore": number(dig(nc, "advancedMachineFeatures", "threadsPerCore")) or UNSET,
        "sysctls": dict(dig(nc, "linuxNodeConfig", "sysctls", default={})),
        "maxRunDuration": nc.get("maxRunDuration"),
    }


def tpu_pools(rendering) -> list[dict[str, Any]]:
    """Our TPU slice pools (those with a TPU placement or machine), normalised."""
    private = bool(dig(rendering.by_type(CLUSTER)[0].inputs, "privateClusterConfig", "enablePrivateNodes"))
    return [_pool(r.inputs, private) for r in rendering.by_type(NODE_POOL)
            if r.inputs["nodeConfig"]["machineType"].startswith("ct")]


def ours(rendering) -> dict[str, Any]:
    """prod's rendered plan in the peers' keys, one flat map (``section.field``)."""
    (cluster,) = rendering.by_type(CLUSTER)
    c = cluster.inputs
    pools = tpu_pools(rendering)
    assert pools and all(p == pools[0] for p in pools), "every slice pool is the same shape and settings"
    tpu = pools[0]
    (system,) = [r for r in rendering.by_type(NODE_POOL) if r.inputs["name"] == "system"]
    sys_pool = _pool(system.inputs, bool(dig(c, "privateClusterConfig", "enablePrivateNodes")))

    addons = c.get("addonsConfig") or {}
    out: dict[str, Any] = {
        "shape.slices": len(pools),
        "shape.machineType": tpu["machineType"],
        "shape.topology": tpu["placementPolicy"]["tpuTopology"],
        "shape.hostsPerSlice": tpu["nodeCount"],
        "shape.chipsPerHost": chips_per_host(tpu["machineType"]),
        "cluster.locationType": location_type(c["location"]),
        "cluster.releaseChannel": dig(c, "releaseChannel", "channel", default="UNSPECIFIED"),
        "cluster.version": version_choice(c.get("minMasterVersion")),
        "cluster.maintenanceWindow": _our_window(c),
        "cluster.maintenanceExclusions": sorted(dig(e, "exclusionOptions", "scope", default="NO_UPGRADES")
                                                for e in dig(c, "maintenancePolicy", "maintenanceExclusions",
                                                             default=[])),
        "cluster.networkingMode": c.get("networkingMode"),
        "cluster.datapathProvider": datapath(c.get("datapathProvider")),
        "cluster.enableMultiNetworking": bool(c.get("enableMultiNetworking")),
        "cluster.networkPolicy": bool(dig(c, "networkPolicy", "enabled")),
        "cluster.network": "project default VPC" if c.get("network", "default") == "default" else "its own VPC",
        "cluster.ipAllocation": {"pods": dig(c, "ipAllocationPolicy", "clusterIpv4CidrBlock"),
                                 "services": dig(c, "ipAllocationPolicy", "servicesIpv4CidrBlock")},
        # Extra networks declared to the cluster as GKE Network objects (GKENetworkParamSet + Network).
        "cluster.networkObjects": len([r for r in rendering.resources if r.type.endswith(":GKENetworkParamSet")]),
        "cluster.workloadIdentity": bool(dig(c, "workloadIdentityConfig", "workloadPool")),
        "cluster.addons.rayOperator": any(x.get("enabled") for x in addons.get("rayOperatorConfigs") or []),
        **{f"cluster.addons.{k}": dig(addons, v, "enabled", default=ADDON_DEFAULTS[k])
           for k, v in ADDON_INPUTS.items()},
        "cluster.privateNodes": bool(dig(c, "privateClusterConfig", "enablePrivateNodes")),
        "cluster.ipEndpoint": _ip_endpoint(c),
        "cluster.dnsEndpointExternalTraffic": bool(dig(c, "controlPlaneEndpointsConfig", "dnsEndpointConfig",
                                                       "allowExternalTraffic")),
        "cluster.shieldedNodes": c.get("enableShieldedNodes", True),
        "cluster.deletionProtection": c.get("deletionProtection", True),
        # Managed collection is on by default in new clusters from GKE 1.27.
        "cluster.managedPrometheus": dig(c, "monitoringConfig", "managedPrometheus", "enabled", default=True),
        "cluster.autoscalingProfile": dig(c, "clusterAutoscaling", "autoscalingProfile", default="BALANCED"),
        "cluster.kueue.tpuQuota": _tpu_quota(rendering),
        "cluster.kueue.version": _kueue_version(rendering),
        "cluster.jobset": any("jobset" in json.dumps(r.inputs).lower() for r in rendering.resources
                              if r.type.startswith("kubernetes:helm") or "jobset" in r.type.lower()),
    }
    out.update({f"nodePool.{k}": v for k, v in tpu.items()})
    out.update({f"systemPool.{k}": sys_pool[k] for k in (
        "machineType", "nodeCount", "autoscaling", "diskSizeGb", "taints", "autoUpgrade", "autoRepair", "imageType",
        "gvnic", "version", "workloadMetadataMode", "oauthScopes")})
    out.update(_our_networks(rendering, tpu))
    return out


def _our_window(c: Mapping[str, Any]) -> str:
    w = dig(c, "maintenancePolicy", "recurringWindow")
    return maintenance_window(w["recurrence"], w["startTime"][11:16]) if w else UNSET


def _ip_endpoint(c: Mapping[str, Any]) -> str:
    if dig(c, "controlPlaneEndpointsConfig", "ipEndpointsConfig", "enabled") is False:
        return "off"
    if dig(c, "privateClusterConfig", "enablePrivateEndpoint"):
        return "private only"
    authorized = dig(c, "masterAuthorizedNetworksConfig", "cidrBlocks", default=[])
    return "public, authorized networks" if authorized else "public, any source"


def _tpu_quota(rendering) -> int:
    return sum(int(res["nominalQuota"])
               for r in rendering.resources if r.type.endswith(":ClusterQueue")
               for g in r.inputs["spec"]["resourceGroups"] for f in g["flavors"] for res in f["resources"]
               if res["name"] == "google.com/tpu")


def _kueue_version(rendering) -> str | None:
    """Kueue's version as its controller's image names it (workloads/kueue_install.py)."""
    return next((c["image"].rsplit(":v", 1)[-1] for r in rendering.by_type("kubernetes:apps/v1:Deployment")
                 if r.inputs["metadata"]["name"] == "kueue-controller-manager"
                 for c in r.inputs["spec"]["template"]["spec"]["containers"]), None)


def _our_networks(rendering, tpu: Mapping[str, Any]) -> dict[str, Any]:
    """The DCN networks (those the TPU pools attach), their subnets, NAT and firewall rules."""
    attached = {n["network"] for r in rendering.by_type(NODE_POOL)
                for n in dig(r.inputs, "networkConfig", "additionalNodeNetworkConfigs", default=[])}
    nets = [r for r in rendering.by_type(NETWORK) if r.inputs["name"] in attached]
    by_urn = {r.urn: r for r in nets}
    subnets: dict[str, list[str]] = {n.inputs["name"]: [] for n in nets}
    for s in rendering.by_type(SUBNETWORK):
        for dep in s.dependencies:
            if dep in by_urn:
                subnets[by_urn[dep].inputs["name"]].append(s.inputs["ipCidrRange"])
    routers = {r.inputs["name"]: r.inputs["network"] for r in rendering.by_type(ROUTER)}
    natted = {routers.get(n.inputs["router"]) for n in rendering.by_type(ROUTER_NAT)}
    rules = [{"network": f.inputs["network"], "direction": f.inputs.get("direction", "INGRESS"),
              "sourceRanges": f.inputs.get("sourceRanges", []), "allow": f.inputs.get("allows", [])}
             for f in rendering.by_type(FIREWALL)]
    networks = [{"name": n.inputs["name"], "mtu": number(n.inputs.get("mtu")),
                 "routingMode": n.inputs.get("routingMode") or GCE_DEFAULT_ROUTING_MODE,
                 "subnets": subnets[n.inputs["name"]], "cloudNat": n.inputs["name"] in natted} for n in nets]
    return _network_fields(networks, rules, nic="GVNIC" if tpu["gvnic"] else "VIRTIO_NET")


def _network_fields(dcn: list[dict[str, Any]], rules: list[dict[str, Any]], nic: str | None) -> dict[str, Any]:
    """Networks and firewall keys from normalised DCN networks ({name, mtu, routingMode, subnets, cloudNat}) and
    firewall rules ({network, direction, sourceRanges, allow}). Per-network keys only where there are DCN networks."""
    out: dict[str, Any] = {"networks.dcnCount": len(dcn)}
    if not dcn:
        return out

    def one(values: list[Any]) -> Any:
        return values[0] if all(v == values[0] for v in values) else values

    out["networks.mtu"] = one([n["mtu"] for n in dcn])
    out["networks.routingMode"] = one([n["routingMode"] for n in dcn])
    out["networks.subnetsPerNetwork"] = one([len(n["subnets"]) for n in dcn])
    out["networks.subnetPrefix"] = one(sorted({f"/{ipaddress.ip_network(s).prefixlen}" for n in dcn
                                               for s in n["subnets"]}))
    out["networks.cloudNat"] = one([n["cloudNat"] for n in dcn])
    if nic:
        out["networks.nicType"] = nic

    def internal(rule: Mapping[str, Any]) -> bool:
        return rule["direction"] == "INGRESS" and all(ipaddress.ip_network(r).is_private for r in rule["sourceRanges"])

    def all_ports(allow: Mapping[str, Any]) -> bool:
        return allow["protocol"] == "icmp" or allow.get("ports") in (None, [], ["0-65535"], ["1-65535"])

    per_net = []
    for n in dcn:
        mine = [r for r in rules if r["network"] == n["name"]]
        inside = [r for r in mine if internal(r)]
        per_net.append({
            "internalIngress": any({"tcp", "udp", "icmp"} <= {a["protocol"] for a in r["allow"] if all_ports(a)}
                                   for r in inside),
            "protocols": tuple(sorted({a["protocol"] for r in inside for a in r["allow"]})),
            "sourceIsOwnSubnet": bool(inside) and all(
                {ipaddress.ip_network(s) for s in r["sourceRanges"]} <= {ipaddress.ip_network(s) for s in n["subnets"]}
                for r in inside),
            "iapSsh": any(ipaddress.ip_network(s).subnet_of(IAP_RANGE) for r in mine for s in r["sourceRanges"]
                          if ipaddress.ip_network(s).version == 4),
        })
    for key in per_net[0]:
        out[f"firewall.{key}"] = one([p[key] for p in per_net])
    return out


# ----------------------------------------------------------------------------------- the peers


def _peer_pool(p: Mapping[str, Any]) -> dict[str, Any]:
    """A peer's node pool in our keys; only the fields the peer's plan has."""
    out: dict[str, Any] = {}
    has = p.__contains__
    if has("machineType"):
        out["machineType"] = p["machineType"]
    if has("nodeLocations"):
        out["zones"] = len(p["nodeLocations"])
    if has("placementPolicy"):
        out["placementPolicy"] = placement(p["placementPolicy"])
    if has("nodeCount"):
        # An autoscaled pool's --num-nodes (xpk --flex: 0) is its initial size, not a fixed one.
        out["nodeCount"] = _size(number(p["nodeCount"]), p.get("autoscaling"), number(p["nodeCount"]))
    if has("autoscaling"):
        out["autoscaling"] = autoscaling(p["autoscaling"])
    if has("reservationAffinity"):
        out["reservationAffinity"] = reservation(p["reservationAffinity"])
    for key in ("spot", "flexStart", "queuedProvisioning"):
        if has(key):
            out[key] = bool(p[key])
    if has("maxRunDuration"):
        out["maxRunDuration"] = p["maxRunDuration"]
    if has("additionalNetworks"):
        out["additionalNetworks"] = len(p["additionalNetworks"] or [])
    if has("acceleratorNetworkProfile"):
        out["acceleratorNetworkProfile"] = p["acceleratorNetworkProfile"]
    if has("kubernetesLabels"):
        out["dranetLabel"] = (p["kubernetesLabels"] or {}).get(DRANET_LABEL) == "true"
    if has("enablePrivateNodes"):
        out["privateNodes"] = p["enablePrivateNodes"]
    if has("version"):
        out["version"] = node_version(p["version"])
    if has("autoUpgrade"):
        # Unset: on (GKE refuses it off in a release channel, and both peers' clusters are in one).
        out["autoUpgrade"] = True if p["autoUpgrade"] is None else p["autoUpgrade"]
    if has("autoRepair"):
        out["autoRepair"] = True if p["autoRepair"] is None else p["autoRepair"]  # gcloud/GKE: on by default
    if has("upgradeSettings"):
        out["upgradeSettings"] = compact(p["upgradeSettings"]) or UNSET
    if has("imageType"):
        out["imageType"] = (p["imageType"] or GKE_DEFAULT_IMAGE).upper()
    if has("gvnic"):
        out["gvnic"] = bool(p["gvnic"])
    if has("diskType"):
        out["diskType"] = p["diskType"] or UNSET
    if has("diskSizeGb"):
        out["diskSizeGb"] = number(p["diskSizeGb"]) or GKE_DEFAULT_DISK_GB
    if has("serviceAccount"):
        out["serviceAccount"] = service_account(p["serviceAccount"])
    if has("oauthScopes"):
        out["oauthScopes"] = scopes(p["oauthScopes"])
    if has("workloadMetadataMode"):
        out["workloadMetadataMode"] = p["workloadMetadataMode"] or UNSET
    if has("taints"):
        out["taints"] = taints(p["taints"])
    if has("shieldedInstance"):
        out["shieldedInstance"] = {**GKE_DEFAULT_SHIELDED, **(p["shieldedInstance"] or {})}
    if has("hostMaintenanceInterval"):
        out["hostMaintenanceInterval"] = p["hostMaintenanceInterval"] or UNSET
    if has("maxPodsPerNode"):
        out["maxPodsPerNode"] = number(p["maxPodsPerNode"]) or GKE_DEFAULT_MAX_PODS
    if has("threadsPerCore"):
        out["threadsPerCore"] = number(p["threadsPerCore"]) or UNSET
    if has("sysctls"):
        out["sysctls"] = dict(p["sysctls"] or {})
    return out


def variant_score(pool: Mapping[str, Any], prod_pool: Mapping[str, Any]) -> int:
    """How many capacity fields of a peer's TPU pool match prod's: the variant compared is the best."""
    keys = ("nodeCount", "autoscaling", "reservationAffinity", "spot", "flexStart")
    return sum(k in pool and pool[k] == prod_pool[k] for k in keys)


def best_variant(plan: Mapping[str, Any], prod_pool: Mapping[str, Any]) -> str:
    variants = {p["variant"] for p in plan["nodePools"] if p["role"] == "tpu-slice"}
    return max(sorted(variants), key=lambda v: variant_score(
        _peer_pool(next(p for p in plan["nodePools"] if p.get("variant") == v)), prod_pool))


def theirs(plan: Mapping[str, Any], prod_pool: Mapping[str, Any]) -> dict[str, Any]:
    """A peer's plan in our keys (only what it has), TPU pools from its best-matching variant."""
    c = plan["cluster"]
    shape = plan["shape"]
    out: dict[str, Any] = {
        "shape.slices": shape["slices"], "shape.machineType": shape["machineType"], "shape.topology": shape["topology"],
        "shape.hostsPerSlice": shape["hostsPerSlice"], "shape.chipsPerHost": shape["chipsPerHost"],
        "cluster.locationType": c["locationType"].split()[0],
        "cluster.releaseChannel": c["releaseChannel"],
        "cluster.version": version_choice(c.get("versionPrefix") or c.get("version")),
        "cluster.networkingMode": c["networkingMode"],
        "cluster.datapathProvider": datapath(c["datapathProvider"]),
        "cluster.enableMultiNetworking": bool(c["enableMultiNetworking"]),
        "cluster.network": "project default VPC" if c["network"].startswith("default") else "its own VPC",
        "cluster.workloadIdentity": bool(c.get("workloadIdentity")),
        "cluster.privateNodes": bool(c["privateNodes"]),
        "cluster.kueue.tpuQuota": c["kueue"]["clusterQueueNominalQuotaTpu"],
        "cluster.jobset": bool(c.get("jobset")),
    }
    for key, value in c["addons"].items():
        if key in ADDON_DEFAULTS:
            out[f"cluster.addons.{key}"] = value if isinstance(value, bool) else ADDON_DEFAULTS[key]
    if "dailyMaintenanceWindowStart" in c:
        out["cluster.maintenanceWindow"] = maintenance_window("FREQ=DAILY", c["dailyMaintenanceWindowStart"])
    if "maintenanceExclusions" in c:
        out["cluster.maintenanceExclusions"] = sorted(e["scope"] for e in c["maintenanceExclusions"] or [])
    if "networkPolicy" in c:
        out["cluster.networkPolicy"] = bool((c["networkPolicy"] or {}).get("enabled"))
    if "ipAllocation" in c:
        out["cluster.ipAllocation"] = {"pods": c["ipAllocation"]["pods"], "services": c["ipAllocation"]["services"]}
    if "networkObjects" in c:
        out["cluster.networkObjects"] = sum(o["kind"] == "GKENetworkParamSet" for o in c["networkObjects"])
    elif "additionalNetworks" in c:
        out["cluster.networkObjects"] = len(c["additionalNetworks"])
    if "privateEndpoint" in c:
        authorized = c.get("masterAuthorizedNetworks")
        out["cluster.ipEndpoint"] = ("private only" if c["privateEndpoint"]
                                     else "public, authorized networks" if authorized else "public, any source")
    if "dnsEndpointAllowExternalTraffic" in c:
        out["cluster.dnsEndpointExternalTraffic"] = bool(c["dnsEndpointAllowExternalTraffic"])
    elif "dnsEndpoint" in c:
        out["cluster.dnsEndpointExternalTraffic"] = bool(c["dnsEndpoint"])  # gcloud --enable-dns-access
    for key, ours_key in (("shieldedNodes", "shieldedNodes"), ("deletionProtection", "deletionProtection"),
                          ("managedPrometheus", "managedPrometheus")):
        if key in c:
            out[f"cluster.{ours_key}"] = bool(c[key])
    if "autoscalingProfile" in c:
        out["cluster.autoscalingProfile"] = c["autoscalingProfile"].upper().replace("-", "_")
    if c["kueue"].get("version"):
        out["cluster.kueue.version"] = c["kueue"]["version"].lstrip("v")

    variant = best_variant(plan, prod_pool)
    pools = [_peer_pool(p) for p in plan["nodePools"] if p.get("variant") == variant]
    assert pools and all(p == pools[0] for p in pools), f"{plan['peer']}: the slices of {variant!r} differ"
    out.update({f"nodePool.{k}": v for k, v in pools[0].items()})
    (system,) = [p for p in plan["nodePools"] if p["role"].startswith("system")]
    sys_pool = _peer_pool(system)
    out.update({f"systemPool.{k}": v for k, v in sys_pool.items()})
    out.update(_peer_networks(plan))
    return out


def _peer_networks(plan: Mapping[str, Any]) -> dict[str, Any]:
    dcn = [n for n in plan["networks"] if not n["purpose"].startswith("cluster")]
    networks = [{"name": n["name"], "mtu": n["mtu"], "routingMode": n.get("routingMode") or GCE_DEFAULT_ROUTING_MODE,
                 "subnets": [s["cidr"] for s in n["subnets"]], "cloudNat": bool(n.get("cloudNat"))} for n in dcn]
    rules = [{"network": f["network"], "direction": f["direction"], "sourceRanges": f["sourceRanges"],
              "allow": f["allow"]} for f in plan["firewall"]]
    nic = dcn[0].get("nicType") if dcn else None
    return _network_fields(networks, rules, nic=nic)


# ----------------------------------------------------------------------------------- the comparison


def compare(ours_plan: Mapping[str, Any], peer_plan_: Mapping[str, Any], peer: str) -> dict[str, tuple[Any, Any]]:
    """``{"<peer>:<key>": (ours, peer's)}`` for every key both have whose values differ."""
    return {f"{peer}:{k}": (ours_plan[k], v) for k, v in sorted(peer_plan_.items())
            if k in ours_plan and ours_plan[k] != v}


def comparisons(rendering) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Each peer's name -> (our normalised plan, the peer's, on the keys both have)."""
    mine = ours(rendering)
    out = {}
    for peer in PEER_NAMES:
        other = theirs(peer_plan(peer), {k.split(".", 1)[1]: v for k, v in mine.items() if k.startswith("nodePool.")})
        shared = sorted(set(mine) & set(other))
        out[peer] = ({k: mine[k] for k in shared}, {k: other[k] for k in shared})
    return out


def differences(rendering) -> dict[str, tuple[Any, Any]]:
    """Every difference with every peer: ``{"<peer>:<key>": (ours, peer's)}``."""
    out: dict[str, tuple[Any, Any]] = {}
    for peer, (mine, other) in comparisons(rendering).items():
        out.update(compare(mine, other, peer))
    return out


def readme_peer_table(text: str) -> dict[str, list[str]]:
    """The rows of the first table under ``### Compared with the peers``: id -> [ours, peer's, why]."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == PEER_SECTION), None)
    if start is None:
        return {}
    rows: dict[str, list[str]] = {}
    in_table = False
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if in_table:
                break
            continue
        in_table = True
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        first = cells[0].strip("`")
        if first in ("id", "difference") or set(first) <= set("-: "):
            continue
        rows[first] = cells[1:]
    return rows


# ----------------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def compared(prod):
    return comparisons(prod)


@pytest.fixture(scope="module")
def ours_plan(prod):
    return ours(prod)


def test_every_difference_is_explained_in_the_readme(prod):
    found = differences(prod)
    table = readme_peer_table(documentation())
    unexplained = sorted(set(found) - set(table))
    stale = sorted(set(table) - set(found))
    assert not unexplained and not stale, (
        "docs/cloud-rules.md '### Compared with the peers' is out of date.\n"
        + "".join(f"  unexplained: {i}: ours {found[i][0]!r}, peer's {found[i][1]!r}\n" for i in unexplained)
        + "".join(f"  stale row: {i}\n" for i in stale))
    for rid, cells in table.items():
        assert len(cells) == 3 and all(cells), f"docs/cloud-rules.md row {rid}: needs ours, peer's and why"


def test_readme_table_parser():
    text = ("intro\n### Compared with the peers\n\npara\n\n| id | ours | peer's | why |\n|---|---|---|---|\n"
            "| `xpk:a.b` | 1 | 2 | because |\n| cluster-toolkit:c | x \\| y | z | so |\n\nafter\n| not:this | | | |\n")
    assert readme_peer_table(text) == {"xpk:a.b": ["1", "2", "because"], "cluster-toolkit:c": ["x \\| y", "z", "so"]}
    assert readme_peer_table("no section") == {}


def test_the_compared_variant_is_the_one_closest_to_prod(ours_plan):
    pool = {k.split(".", 1)[1]: v for k, v in ours_plan.items() if k.startswith("nodePool.")}
    assert best_variant(peer_plan("cluster-toolkit"), pool) == "reservation (main blueprint)"
    assert best_variant(peer_plan("xpk"), pool) == "on-demand"


def test_each_peer_is_compared_on_the_fields_that_matter(compared):
    for peer, (mine, _) in compared.items():
        for key in ("cluster.releaseChannel", "cluster.datapathProvider", "cluster.enableMultiNetworking",
                    "cluster.workloadIdentity", "cluster.addons.gcsFuseCsiDriver", "cluster.addons.rayOperator",
                    "cluster.privateNodes", "nodePool.machineType", "nodePool.placementPolicy", "nodePool.nodeCount",
                    "nodePool.autoscaling", "nodePool.gvnic", "nodePool.version", "nodePool.autoUpgrade",
                    "nodePool.autoRepair", "nodePool.reservationAffinity", "nodePool.additionalNetworks",
                    "nodePool.oauthScopes", "nodePool.workloadMetadataMode", "nodePool.dranetLabel",
                    "systemPool.machineType", "networks.dcnCount"):
            assert key in mine, f"{peer}: {key} not compared"
    ct = compared["cluster-toolkit"][0]
    for key in ("networks.mtu", "firewall.internalIngress", "firewall.protocols", "firewall.sourceIsOwnSubnet",
                "nodePool.threadsPerCore", "nodePool.hostMaintenanceInterval"):
        assert key in ct, f"cluster-toolkit: {key} not compared"
    assert "nodePool.maxPodsPerNode" in compared["xpk"][0]


def test_agreements_with_both_peers(compared):
    """The points that matter: both peers, apply-tested, do these as prod does."""
    for peer, (mine, other) in compared.items():
        for key, value in (
            ("shape.slices", 2), ("shape.machineType", "ct6e-standard-4t"), ("shape.topology", "4x4"),
            ("shape.hostsPerSlice", 4), ("shape.chipsPerHost", 4),
            ("nodePool.machineType", "ct6e-standard-4t"),
            ("nodePool.placementPolicy", {"type": "COMPACT", "tpuTopology": "4x4"}),
            ("nodePool.nodeCount", 4), ("nodePool.zones", 1), ("nodePool.autoscaling", None),
            ("nodePool.gvnic", True), ("nodePool.version", "cluster version"),
            ("nodePool.autoUpgrade", True), ("nodePool.autoRepair", True), ("nodePool.spot", False),
            ("nodePool.flexStart", False), ("nodePool.oauthScopes", (SCOPE + "cloud-platform",)),
            ("cluster.datapathProvider", "ADVANCED_DATAPATH"), ("cluster.enableMultiNetworking", True),
            ("cluster.networkingMode", "VPC_NATIVE"), ("cluster.kueue.tpuQuota", 32),
        ):
            assert mine[key] == value, f"ours: {key} = {mine[key]!r}"
            assert other[key] == value, f"{peer}: {key} = {other[key]!r}"


def test_agreements_with_cluster_toolkit_networks_and_firewall(compared):
    mine, ct = compared["cluster-toolkit"]
    for key, value in (
        ("networks.mtu", 8896), ("networks.nicType", "GVNIC"),
        ("firewall.internalIngress", True),  # an internal ingress allow rule on every extra VPC
        ("firewall.protocols", ("icmp", "tcp", "udp")),
        ("cluster.privateNodes", True), ("cluster.workloadIdentity", True), ("cluster.releaseChannel", "REGULAR"),
        ("nodePool.workloadMetadataMode", "GKE_METADATA"), ("nodePool.hostMaintenanceInterval", UNSET),
        ("nodePool.maxPodsPerNode", GKE_DEFAULT_MAX_PODS), ("nodePool.serviceAccount", "dedicated"),
    ):
        assert mine[key] == value, f"ours: {key} = {mine[key]!r}"
        assert ct[key] == value, f"cluster-toolkit: {key} = {ct[key]!r}"


def test_every_dcn_network_has_jumbo_frames_and_its_own_firewall(ours_plan, prod):
    assert ours_plan["networks.dcnCount"] == 2
    dcn = {n.network for n in prod.spec.networks}
    assert {number(n.inputs["mtu"]) for n in prod.by_type(NETWORK) if n.inputs["name"] in dcn} == {8896}
    assert ours_plan["firewall.internalIngress"] is True
    assert ours_plan["firewall.sourceIsOwnSubnet"] is True
    assert ours_plan["nodePool.dranetLabel"] is True  # GKE managed DRANET attaches the extra NICs, as xpk's pools


def test_autoscaled_pools_set_per_zone_limits_as_both_flex_start_peers(prod_fallbacks):
    """When a slice's pools scale (fallbacks, flex-start), the limits are per zone, as both peers' flex-start pools."""
    flex = [p for p in tpu_pools(prod_fallbacks) if p["flexStart"]]
    assert flex
    for peer in PEER_NAMES:
        plan = peer_plan(peer)
        theirs_flex = [_peer_pool(p) for p in plan["nodePools"]
                       if p["role"] == "tpu-slice" and p.get("flexStart")]
        assert theirs_flex, peer
        for mine in flex:
            for other in theirs_flex:
                assert mine["autoscaling"]["perZone"] == other["autoscaling"]["perZone"] == {"min": 0, "max": 4}
                assert "total" not in mine["autoscaling"] and "total" not in other["autoscaling"]
                assert mine["autoscaling"]["locationPolicy"] == other["autoscaling"]["locationPolicy"] == "ANY"
                assert mine["reservationAffinity"] == other["reservationAffinity"] == "NO_RESERVATION"
                assert mine["autoRepair"] is other["autoRepair"] is False
                assert str(mine["nodeCount"]).startswith("autoscaled") and str(other["nodeCount"]).startswith(
                    "autoscaled")
    for pool in tpu_pools(prod_fallbacks):
        assert "total" not in (pool["autoscaling"] or {}), "autoscaled TPU pools set per-zone limits"


def test_normalisation_makes_equal_meanings_equal():
    cp = SCOPE + "cloud-platform"
    assert scopes(["storage-full", "gke-default", f'"{cp}"']) == scopes([cp]) == (cp,)
    assert scopes(["storage-full", "gke-default"]) != (cp,)
    assert datapath("--enable-dataplane-v2") == datapath("ADVANCED_DATAPATH") == "ADVANCED_DATAPATH"
    assert version_choice("1.35.") == version_choice("1.35") == "newest 1.35 patch"
    assert version_choice("1.35.2-gke.1842000") != version_choice("1.35.")  # a pin is not the prefix
    assert version_choice(None) == version_choice("<RAPID channel default version>") == "channel default"
    assert node_version(None) == node_version("<cluster master version>") == "cluster version"
    assert reservation({"type": "specific", "reservation": "r"}) == reservation(
        {"consumeReservationType": "SPECIFIC_RESERVATION"}) == "SPECIFIC_RESERVATION"
    assert autoscaling({"enabled": True, "maxNodes": 4, "locationPolicy": "ANY"}) == autoscaling(
        {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"})
    assert location_type("us-east5-b") == "ZONAL" and location_type("us-east5") == "REGIONAL"
