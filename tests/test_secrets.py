"""Secrets stay out of what the harness writes and prints (rvt_bench.core.secrets,
rvt_bench.harness.secrets); the end-to-end attack (a sweep against a server that echoes the key)
is tests/test_sandbox_attacks.py::test_3_4_secrets_reach_no_file_and_no_console_of_a_sweep."""
import logging

import pytest

from rvt_bench.core import secrets
from rvt_bench.core.store import write_atomic
from rvt_bench.harness.manifest import redact, redact_overrides
from rvt_bench.harness.secrets import hide_secret_overrides


def test_command_line_secrets_move_into_the_environment_one_sweep_element_at_a_time():
    env: dict[str, str] = {"RVT_BENCH_SECRET_0": "taken"}
    argv = ["-m", "policy.api_key=sk-test-0123456789", "policy.base_url=http://u:pw-0123456789@h:1/v1,http://h:1/v1",
            "model.max_rounds=1,2", "judge.api_key=null", "+judge.api_key='sk-quoted,0123456789'"]
    assert hide_secret_overrides(argv, env) == [
        "-m", "policy.api_key=${oc.env:RVT_BENCH_SECRET_1}",
        "policy.base_url=${oc.env:RVT_BENCH_SECRET_2},http://h:1/v1",
        "model.max_rounds=1,2", "judge.api_key=null", "+judge.api_key=${oc.env:RVT_BENCH_SECRET_3}"]
    assert env == {"RVT_BENCH_SECRET_0": "taken", "RVT_BENCH_SECRET_1": "sk-test-0123456789",
                   "RVT_BENCH_SECRET_2": "http://u:pw-0123456789@h:1/v1", "RVT_BENCH_SECRET_3": "sk-quoted,0123456789"}
    # the key is a secret as a whole, a URL only for its credential
    assert secrets.scrub("key sk-test-0123456789 at http://h:1/v1") == "key <redacted> at http://h:1/v1"
    assert secrets.scrub("pw-0123456789") == "<redacted>"


def test_url_credentials_and_remembered_values_are_scrubbed_and_placeholders_are_not():
    secrets.remember("sk-remembered-0123456789")
    secrets.remember("EMPTY")
    secrets.remember("short")
    text = "HTTP 401 from https://bob:hunter2@api.example/v1: Incorrect API key provided: sk-remembered-0123456789; EMPTY short"
    assert secrets.scrub(text) == ("HTTP 401 from https://<redacted>@api.example/v1: Incorrect API key provided: "
                                   "<redacted>; EMPTY short")


def test_the_forms_a_server_may_echo_are_scrubbed_too():
    import base64

    secrets.remember_config({"base_url": "https://ghp_TOKENonly1234567@git.example/x",          # a token as user name
                             "url": "http://u:p%40ss%2Fw0rd-0123@h:1/v1"})                      # a quoted password
    secrets.remember('sk-"quoted"-0123456789')
    for echoed in (base64.b64encode(b"ghp_TOKENonly1234567:").decode(),   # Basic auth as httpx sends it
                   base64.b64encode(b"u:p@ss/w0rd-0123").decode(),
                   "p@ss/w0rd-0123",                                       # the password decoded
                   '{"error": "bad key sk-\\"quoted\\"-0123456789"}'):  # JSON-escaped
        assert secrets.MASK in secrets.scrub(f"echo: {echoed}"), echoed
        assert "0123" not in secrets.scrub(f"echo: {echoed}") and "TOKEN" not in secrets.scrub(f"echo: {echoed}")


def test_log_records_are_scrubbed_when_made_traceback_included():
    secrets.scrub_logs()
    secrets.remember("sk-in-a-log-0123456789")
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(self.format(record))

    log = logging.getLogger("test_secrets")
    log.addHandler(Keep())
    try:
        try:
            raise ValueError("server said sk-in-a-log-0123456789")
        except ValueError:
            log.error("failed at %s", "http://u:sk-in-a-log-0123456789@h/v1", exc_info=True)
    finally:
        log.handlers.clear()
    assert len(records) == 1 and "sk-in-a-log" not in records[0]
    assert "failed at http://<redacted>@h/v1" in records[0] and "ValueError: server said <redacted>" in records[0]


def test_run_files_configs_and_overrides_hold_no_secret(tmp_path):
    secrets.remember("sk-in-a-file-0123456789")
    write_atomic(tmp_path / "metrics.json", '{"reason": "echo sk-in-a-file-0123456789"}')
    assert (tmp_path / "metrics.json").read_text() == '{"reason": "echo <redacted>"}'
    cfg = {"policy": {"api_key": "anything", "base_url": "http://u:p4ssw0rd-long@h/v1"},
           "_overrides": ["policy.base_url=${oc.env:RVT_BENCH_SECRET_4}", "policy.api_key=x", "model.max_rounds=2"]}
    assert redact(cfg) == {"policy": {"api_key": "<redacted>", "base_url": "http://<redacted>@h/v1"},
                           "_overrides": ["policy.base_url=<redacted>", "policy.api_key=<redacted>", "model.max_rounds=2"]}
    assert redact_overrides(["run_bench.py", "policy.base_url=http://u:p@h/v1"]) == ["run_bench.py", "policy.base_url=http://<redacted>@h/v1"]


# --- credential query parameters and header values, scrubbed like user-info ----------------------------


def test_credential_query_parameters_are_scrubbed_and_other_parameters_kept():
    text = ("http://h:1/v1?api_key=sk-q-0123 https://b.example/c?sv=2024&sig=AbC%2Fxyz0&se=2 "
            "wss://h/s?access_token=at-0123&x=1 https://h/?key=AIzaSyQ0123;token=t-0123#frag")
    assert secrets.scrub(text) == ("http://h:1/v1?api_key=<redacted> https://b.example/c?sv=2024&sig=<redacted>&se=2 "
                                   "wss://h/s?access_token=<redacted>&x=1 https://h/?key=<redacted>;token=<redacted>#frag")
    assert secrets.scrub("x=1 monkey=2 a?model=m") == "x=1 monkey=2 a?model=m"


def test_secret_header_values_are_scrubbed_in_every_form_a_library_prints():
    assert secrets.scrub("Authorization: Bearer sk-h-0123456789") == "Authorization: Bearer <redacted>"
    assert secrets.scrub('{"x-api-key": "k-0123456789", "accept": "json"}') == '{"x-api-key": "<redacted>", "accept": "json"}'
    assert secrets.scrub("headers={'Cookie': 'sid=s-0123'}") == "headers={'Cookie': '<redacted>'}"


def test_a_config_s_query_and_header_secrets_are_remembered_wherever_they_are_echoed():
    secrets.remember_config({"base_url": "http://h/v1?api_key=sk-param-0123456789&model=m",
                             "headers": {"Authorization": "Bearer tok-header-0123456789"}})
    echoed = "server: bad key sk-param-0123456789; bad token tok-header-0123456789"
    assert secrets.scrub(echoed) == "server: bad key <redacted>; bad token <redacted>"


def test_a_command_line_url_with_a_credential_parameter_leaves_the_command_line():
    env: dict[str, str] = {}
    argv = ["policy.base_url='http://h:1/v1?api_key=sk-cli-0123456789'", "policy.model=m"]
    assert hide_secret_overrides(argv, env) == ["policy.base_url=${oc.env:RVT_BENCH_SECRET_0}", "policy.model=m"]
    assert env == {"RVT_BENCH_SECRET_0": "http://h:1/v1?api_key=sk-cli-0123456789"}


def test_credential_parameters_reach_no_log_record_file_or_stop_line(tmp_path, capsys):
    from rvt_bench.harness.cli import stop

    secrets.scrub_logs()
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(self.format(record))

    log = logging.getLogger("test_secrets_params")
    log.addHandler(Keep())
    try:
        log.warning("retrying %s", "http://h/v1?access_token=at-log-0123")
    finally:
        log.handlers.clear()
    write_atomic(tmp_path / "run.json", '{"url": "http://h/v1?token=t-file-0123"}')
    try:
        stop("server_down", "the server at policy.base_url=http://h/v1?api_key=sk-stop-0123 cannot be reached")
    except SystemExit:
        pass
    shown = capsys.readouterr().err
    assert records == ["retrying http://h/v1?access_token=<redacted>"]
    assert (tmp_path / "run.json").read_text() == '{"url": "http://h/v1?token=<redacted>"}'
    assert "sk-stop" not in shown and "api_key=<redacted>" in shown


def test_a_url_fragment_in_the_config_is_scrubbed_where_it_is_echoed():
    # adversary review: policy.base_url='http://127.0.0.1:9/v1?key=SECRETK4#SECRETF5' printed #SECRETF5 on the stop line
    secrets.remember_config({"policy": {"base_url": "http://127.0.0.1:9/v1?key=SECRETK4#SECRETF5"}})
    line = secrets.scrub("could not reach http://127.0.0.1:9/v1?key=SECRETK4#SECRETF5 (connection refused)")
    assert "SECRETF5" not in line and "SECRETK4" not in line
    assert "SECRETF5" not in secrets.scrub("the server said: bad fragment SECRETF5")
    assert secrets.scrub("http://h/cb#access_token=abcdefghij&x=1") == "http://h/cb#access_token=<redacted>&x=1"


def test_a_config_dir_value_reading_a_plain_environment_variable_stops_the_run_in_one_line(tmp_path):
    # `${oc.env:NAME}` in a --config-dir YAML copied any variable whose name is not secret-like into
    # metrics.json, report.html and the leaderboard CSV
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    extra = tmp_path / "extra" / "model"
    extra.mkdir(parents=True)
    (extra / "leaky.yaml").write_text("defaults:\n  - precomputed\n  - _self_\nname: m-${oc.env:RVT_TEST_PLAIN}\n")
    env = {**os.environ, "RVT_TEST_PLAIN": "aws-id-AKIA0123456789"}
    proc = subprocess.run([sys.executable, str(repo / "run_bench.py"), "--config-dir", str(tmp_path / "extra"),
                           "+dataset=demo", "+model=leaky", f"model.root={tmp_path}", f"run.root={tmp_path / 'runs'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(proc.stderr.splitlines()) == 1 and "model.name reads environment variable RVT_TEST_PLAIN" in proc.stderr
    assert "AKIA" not in proc.stderr + proc.stdout
    written = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    assert all(".hydra" in p.parts for p in written) and not any("AKIA" in p.read_text() for p in written)


@pytest.mark.parametrize("value, bad", [
    ("${oc.env:HOME}", True), ("x-${oc.env:USER,nobody}", True), ("${oc.decode:'${oc.env:HOME}'}", True),
    ("${oc.env:OPENAI_API_KEY}", False), ("${oc.env:RVT_BENCH_SECRET_3}", False), ("plain", False),
    ("${model.name}", False)])
def test_env_interpolation_problems(value, bad):
    from rvt_bench.harness.secrets import env_interpolation_problems

    found = env_interpolation_problems({"run": {"name": value}, "policy": {"api_key": "${oc.env:MY_KEY}"}})
    assert bool(found) == bad and all(line.startswith("run.name ") for line in found)
