"""tools.controlplane without the binaries (so in plain `make test`): the key material it generates and the
kubeconfig it writes are what kube-apiserver and the official client take; a missing binary is named."""

import ipaddress

import pytest
import yaml
from cryptography import x509
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tools import controlplane
from tools.controlplane import certs


def test_the_serving_certificate_is_signed_by_the_ca_for_loopback_and_the_in_cluster_names(tmp_path):
    pki = certs.generate(tmp_path)
    ca = x509.load_pem_x509_certificate(pki.ca_pem)
    serving = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())
    serving.verify_directly_issued_by(ca)
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in names.get_values_for_type(x509.DNSName)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert all(oct(p.stat().st_mode)[-3:] == "600" for p in (pki.serving_key, pki.sa_key))


def test_the_kubeconfig_loads_in_the_official_client_with_one_context_per_user(tmp_path):
    pki = certs.generate(tmp_path)
    path = tmp_path / "kubeconfig"
    path.write_text(controlplane.kubeconfig_text("https://127.0.0.1:6443", pki.ca_pem,
                                                 {"controlplane": "admin-token", "gpu-portal": "sa-token"}))
    for context, token in (("controlplane", "admin-token"), ("gpu-portal", "sa-token")):
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(config_file=str(path), context=context, client_configuration=configuration)
        assert configuration.host == "https://127.0.0.1:6443"
        assert configuration.api_key["authorization"] == f"Bearer {token}"
        assert configuration.ssl_ca_cert and configuration.verify_ssl
    assert yaml.safe_load(path.read_text())["current-context"] == "controlplane"


def test_start_names_the_missing_binaries_and_the_make_target(tmp_path):
    assert controlplane.missing_binaries(tmp_path) == list(controlplane.BINARIES)
    with pytest.raises(controlplane.ControlPlaneError, match="make controlplane-bin"):
        controlplane.start(bin_dir=tmp_path)
