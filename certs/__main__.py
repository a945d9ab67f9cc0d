"""`python -m certs`: make, check and publish the webhook's certificates.

Examples:
  python -m certs init --dir tls --service placement-webhook --namespace placement-webhook
  python -m certs ca-bundle --dir tls
  python -m certs inject --dir tls deploy/webhook.yaml > webhook-with-ca.yaml
  python -m certs in-cluster --namespace placement-webhook --interval 60   (in a pod)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from certs.authority import (
    CA_CERT,
    TLS_CERT,
    ca_bundle,
    ensure_serving_pair,
    needs_rotation,
    service_dns_names,
)


def _names(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    dns = list(args.dns)
    if args.service:
        dns += service_dns_names(args.service, args.namespace)
    return dns, list(args.ip)


def _init(args: argparse.Namespace) -> int:
    dns, ips = _names(args)
    done = ensure_serving_pair(args.dir, dns, ips)
    print(f"{args.dir}: {done or 'certificates are valid, nothing to do'}")
    return 0


def _ca_bundle(args: argparse.Namespace) -> int:
    print(ca_bundle((Path(args.dir) / CA_CERT).read_bytes()))
    return 0


def _check(args: argparse.Namespace) -> int:
    dns, ips = _names(args)
    reason = needs_rotation(
        (Path(args.dir) / TLS_CERT).read_bytes(), dns_names=dns, ip_addresses=ips
    )
    print(f"{args.dir}: {reason or 'valid'}")
    return 1 if reason else 0


def _inject(args: argparse.Namespace) -> int:
    bundle = ca_bundle((Path(args.dir) / CA_CERT).read_bytes())
    documents = list(yaml.safe_load_all(Path(args.manifest).read_text()))
    touched = 0
    for doc in documents:
        if not isinstance(doc, dict) or doc.get("kind") not in (
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ):
            continue
        for hook in doc.get("webhooks") or []:
            hook.setdefault("clientConfig", {})["caBundle"] = bundle
            touched += 1
    if not touched:
        print(f"{args.manifest}: no webhook configuration found", file=sys.stderr)
        return 1
    yaml.safe_dump_all(documents, sys.stdout, sort_keys=False)
    return 0


def _in_cluster(args: argparse.Namespace) -> int:
    from certs import incluster

    return incluster.main(args)


def _add_in_cluster(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    text = (
        "keep the CA and serving certificate in Secrets, inject the caBundle into the "
        "webhook configuration, rotate before expiry (runs in the cluster; see certs/incluster.py)"
    )
    cmd = sub.add_parser("in-cluster", help=text, description=text)
    cmd.set_defaults(func=_in_cluster)
    env = os.environ.get
    cmd.add_argument("--namespace", default=env("PLACEMENT_WEBHOOK_NAMESPACE", "placement-webhook"))
    cmd.add_argument("--service", default="placement-webhook", help="Service the cert names")
    cmd.add_argument("--secret", default="placement-webhook-tls", help="serving Secret (tls)")
    cmd.add_argument("--ca-secret", default="placement-webhook-ca", help="CA Secret (Opaque)")
    cmd.add_argument(
        "--webhook-config",
        default="placement-webhook",
        help="MutatingWebhookConfiguration to inject the caBundle into ('' for none)",
    )
    cmd.add_argument("--dns", action="append", default=[], help="extra DNS SAN")
    cmd.add_argument("--ip", action="append", default=[], help="extra IP SAN")
    cmd.add_argument("--kubeconfig", default=None, help="default: in-cluster")
    when = cmd.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="one sync (until nothing is pending)")
    when.add_argument(
        "--interval", type=float, default=60.0, help="seconds between checks (default 60)"
    )
    cmd.add_argument(
        "--settle",
        type=float,
        default=10.0,
        help="seconds before the next pass when one is pending (a CA being published)",
    )
    cmd.add_argument("--rotate-serving", action="store_true", help="re-issue the serving cert now")
    cmd.add_argument("--rotate-ca", action="store_true", help="start a CA rotation now")
    cmd.add_argument("--serving-days", type=float, default=365.0)
    cmd.add_argument("--ca-days", type=float, default=3650.0)
    cmd.add_argument(
        "--retire-after",
        type=float,
        default=3600.0,
        help="seconds an old CA stays in the caBundle after the new serving cert went out",
    )
    cmd.add_argument("--log-format", choices=["json", "text"], default="json")
    cmd.add_argument("--log-level", default="info")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m certs",
        description="CA and serving certificates for placement-webhook (ECDSA P-256). "
        "Files in DIR: ca.crt, ca.key, tls.crt, tls.key, written atomically.",
        epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func, text in (
        ("init", _init, "create the CA and serving pair, or re-issue the pair when due"),
        ("check", _check, "exit 1 when the serving certificate needs rotation"),
        ("ca-bundle", _ca_bundle, "print the base64 caBundle for a webhook clientConfig"),
        ("inject", _inject, "print MANIFEST with the caBundle set on every webhook"),
    ):
        cmd = sub.add_parser(name, help=text, description=text)
        cmd.set_defaults(func=func)
        cmd.add_argument("--dir", required=True, help="folder of the PEM files")
        if name in ("init", "check"):
            cmd.add_argument("--dns", action="append", default=["localhost"], help="DNS SAN")
            cmd.add_argument("--ip", action="append", default=["127.0.0.1"], help="IP SAN")
            cmd.add_argument("--service", help="add the in-cluster names of this Service")
            cmd.add_argument("--namespace", default="placement-webhook")
        if name == "inject":
            cmd.add_argument("manifest", help="YAML with a (Mutating)WebhookConfiguration")
    _add_in_cluster(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (OSError, ValueError) as err:
        print(f"certs: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
