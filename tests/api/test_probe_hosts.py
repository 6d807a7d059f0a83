"""The REST API's probes: the kubelet dials the pod's address, so /livez and /readyz
answer a Host that is an address or one the API serves, and refuse any other name (a
DNS-rebinding page) with 421 ``invalid_input`` naming ``host``."""

from __future__ import annotations

PROBES = ("/livez", "/readyz")


async def test_probes_answer_the_pods_address_and_refuse_other_names(rest) -> None:
    for path in PROBES:
        for host in ("10.0.0.7:8081", "[fd00::7]:8081", "127.0.0.1:8081"):
            response = await rest.client.get(path, headers={"host": host})
            assert response.status_code in (200, 503), (path, host)  # 503: no services here
            assert response.json()["status"] in ("ok", "unavailable")
        for host in ("attacker.example", "attacker.example:8081", "10.0.0.7.nip.io:8081"):
            response = await rest.client.get(path, headers={"host": host})
            assert response.status_code == 421, (path, host)
            error = response.json()["error"]
            assert (error["code"], error["field"]) == ("invalid_input", "host")
