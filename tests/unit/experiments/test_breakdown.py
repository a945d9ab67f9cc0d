"""Reading profiles into per-cause figures (pure: text in, numbers out)."""

from pathlib import Path

from experiments.breakdown import RULES, attribute, parse_traces, pyspy_stacks, table, top

TRACES = """File: kube-apiserver
Type: cpu
-----------+-------------------------------------------------------
      10ms   crypto/tls.(*Conn).Write
             net/http.(*conn).serve
-----------+-------------------------------------------------------
     1.5s   runtime.mallocgc
             k8s.io/apiserver/pkg/admission/plugin/webhook/mutating.(*mutatingDispatcher).Dispatch
             net/http.(*conn).serve
-----------+-------------------------------------------------------
"""


def test_traces_are_root_first_with_seconds():
    stacks = parse_traces(TRACES)
    assert [w for _, w in stacks] == [0.01, 1.5]
    assert stacks[1][0][0] == "net/http.(*conn).serve"
    assert stacks[1][0][-1] == "runtime.mallocgc"


def test_a_stack_goes_to_the_first_matching_cause_callees_included():
    rules = (("webhook call", ("mutatingDispatcher",)), ("tls", ("crypto/tls",)))
    shares = attribute(parse_traces(TRACES), rules)
    assert shares == {"webhook call": 1.5, "tls": 0.01}
    assert attribute(parse_traces(TRACES), ()) == {"other": 1.51}


def test_pyspy_raw_lines_and_per_pod_table(tmp_path: Path):
    raw = tmp_path / "x.pyspy"
    raw.write_text("main (cli.py:3);serve (w.py:9) 30\nmain (cli.py:3);parse (r.py:1) 10\nbad\n")
    stacks = pyspy_stacks(raw)
    assert len(stacks) == 2
    assert top(stacks, count=1) == [("serve (w.py)", 30.0)]
    assert top(stacks, count=1, cumulative=True) == [("main (cli.py)", 40.0)]
    text = table({"serve": 30.0, "parse": 10.0}, unit=0.005, pods=10, label="cause")
    assert "| serve | 150 | 75% | 15.000 |" in text
    assert "| **total** | 200 | 100% | 20.000 |" in text


def test_an_unprofiled_per_pod_figure_is_spread_by_share():
    text = table({"a": 3.0, "b": 1.0}, unit=1.0, pods=None, label="cause", per_pod_ms=8.0)
    assert "| a | 3,000 | 75% | 6.00 |" in text
    assert "| **total** | 4,000 | 100% | 8.00 |" in text


def test_admission_rules_give_a_stack_the_most_specific_step_of_the_request() -> None:
    serve = ("_worker (/lib/concurrent/futures/thread.py:83)",
             "BoundedWorker._serve (/src/webhook/serving/worker.py:356)")  # fmt: skip
    flask = ("BoundedWorker._serve (/src/webhook/serving/worker.py:345)",
             "Flask.__call__ (/venv/flask/app.py:1529)",
             "create_app.<locals>.mutate (/src/webhook/admission/app.py:190)")  # fmt: skip
    stacks = [
        ((*serve, *flask, "parse_review (/src/webhook/admission/review.py:150)"), 3.0),
        ((*serve, *flask, "Logger.info (/lib/logging/__init__.py:1479)"), 2.0),
        ((*serve, "create (/venv/gunicorn/http/wsgi.py:100)"), 1.0),
        ((*serve, "SSLSocket.sendall (/lib/ssl.py:1241)"), 1.0),
        (serve, 4.0),
    ]
    assert attribute(stacks, RULES["admission"]) == {
        "parse_review": 3.0,
        "logging (the decision line)": 2.0,
        "gunicorn environ and response write": 1.0,
        "TLS read and write": 1.0,
        "event loop and thread hand-off": 4.0,
    }
