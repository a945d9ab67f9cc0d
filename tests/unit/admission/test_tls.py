"""Serving certificates are reloaded from disk for new connections."""

from __future__ import annotations

import os
from pathlib import Path

import certs
from webhook.serving.tls import CertificateReloader


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def swap_in_new_pair(folder: Path) -> None:
    """Write a new pair the way kubelet updates a Secret volume: a symlink swap."""
    ca = certs.load_authority(folder / "ca")
    leaf = certs.issue_serving_certificate(ca)
    version = folder / f"v{len(list(folder.glob('v*')))}"
    version.mkdir()
    (version / "tls.crt").write_bytes(leaf.cert_pem)
    (version / "tls.key").write_bytes(leaf.key_pem)
    tmp = folder / "..data_tmp"
    tmp.symlink_to(version.name)
    os.replace(tmp, folder / "..data")


def make_volume(tmp_path: Path) -> Path:
    certs.ensure_serving_pair(tmp_path / "ca")
    swap_in_new_pair(tmp_path)
    (tmp_path / "tls.crt").symlink_to("..data/tls.crt")
    (tmp_path / "tls.key").symlink_to("..data/tls.key")
    return tmp_path


def test_context_is_rebuilt_after_a_symlink_swap(tmp_path: Path) -> None:
    volume = make_volume(tmp_path)
    clock = Clock()
    reloader = CertificateReloader(str(volume / "tls.crt"), str(volume / "tls.key"), clock=clock)
    first = reloader.context()

    swap_in_new_pair(volume)
    assert reloader.context() is first  # not checked again within the interval
    clock.now += 2
    second = reloader.context()

    assert second is not first
    assert reloader.reloads == 1


def test_unchanged_files_keep_the_same_context(tmp_path: Path) -> None:
    volume = make_volume(tmp_path)
    clock = Clock()
    reloader = CertificateReloader(str(volume / "tls.crt"), str(volume / "tls.key"), clock=clock)
    first = reloader.context()
    clock.now += 5
    assert reloader.context() is first
    assert reloader.reloads == 0


def test_a_half_written_pair_keeps_the_old_context_until_it_is_whole(tmp_path: Path) -> None:
    certs.ensure_serving_pair(tmp_path)
    clock = Clock()
    reloader = CertificateReloader(
        str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), clock=clock
    )
    first = reloader.context()

    other = certs.issue_serving_certificate(certs.load_authority(tmp_path))
    certs.write_pem_atomically(tmp_path / "tls.key", other.key_pem)  # key first: mismatched pair
    clock.now += 2
    assert reloader.context() is first

    certs.write_pem_atomically(tmp_path / "tls.crt", other.cert_pem)
    clock.now += 2
    assert reloader.context() is not first


def test_with_client_cas_the_context_requires_a_certificate_from_either_bundle(
    tmp_path: Path,
) -> None:
    import ssl

    certs.ensure_serving_pair(tmp_path / "own")
    other = certs.new_authority("apiserver-client-ca")
    (tmp_path / "other.crt").write_bytes(other.cert_pem)
    reloader = CertificateReloader(
        str(tmp_path / "own" / "tls.crt"),
        str(tmp_path / "own" / "tls.key"),
        client_ca=f"{tmp_path / 'other.crt'},{tmp_path / 'own' / 'ca.crt'}",
    )
    context = reloader.context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    subjects = {dict(x[0] for x in c["subject"])["commonName"] for c in context.get_ca_certs()}
    assert subjects == {"apiserver-client-ca", "placement-webhook-ca"}


def test_without_client_cas_no_certificate_is_asked_for(tmp_path: Path) -> None:
    import ssl

    certs.ensure_serving_pair(tmp_path)
    reloader = CertificateReloader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    assert reloader.context().verify_mode == ssl.CERT_NONE
