"""LLM-as-judge: score free-text answers with an LLM behind any OpenAI-compatible chat endpoint.

One judge for the whole project (conf/judge/openai.yaml; conf/judge/none.yaml = no judge, and then
`make_judge` returns None and callers print NOT_CONFIGURED, never falling back to string matching).

Verdict format (what the prompt asks for and the parser accepts): a JSON object
    {"score": <number in [0, 1]>, "reason": "<one sentence>"}
anywhere in the reply (surrounding text and ``` fences are tolerated; the first JSON object that
has a "score" key is used). 1 = correct, 0 = incorrect, values between = partially correct as the
template defines. A reply without such an object, or with a score that is not a number in [0, 1],
is *unscored*: score None, a reason saying why, error "parse: ...". A call that still fails after
the retries (HTTP 429 / 5xx, timeout, connection error; or at once on other HTTP errors) is
unscored too, error "request: ...". Unscored verdicts are excluded from means and counted
(`judge_summary`), never turned into 0 or 1.

Prompt templates are versioned (TEMPLATES, keyed by (id, version)); a template changes only by
adding a new version. The template id@version is in every verdict (rvt_bench.core.records.JudgeVerdict, the
record scores.jsonl keeps) and in the cache key.

Cache: one JSON file per key under cache_dir/<key[:2]>/<key>.json, key = sha256 of (judge model,
template id, template version, question, references, prediction). It stores the raw reply, which
is parsed on read, so re-scoring costs no request and parser fixes apply to cached replies.
Failed requests are not cached. Files are written to a temporary name and os.replace()d, so two
processes writing the same key leave one complete file (the last writer's).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from tqdm.auto import tqdm

from rvt_bench.core.paths import cache_root
from rvt_bench.core.http import call_with_retries
from rvt_bench.core.records import JudgeVerdict
from rvt_bench.core.store import write_atomic
from rvt_bench.core import files
from rvt_bench.core.codec import unencodable_reason
from rvt_bench.core.types import DatasetFormatError, JudgeError

log = logging.getLogger(__name__)

NOT_CONFIGURED = "judge: not configured"


# --- prompt templates -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptTemplate:
    """A versioned judge prompt; `user` is formatted with question, references, prediction."""

    id: str
    version: int
    system: str
    user: str

    @property
    def tag(self) -> str:
        return f"{self.id}@v{self.version}"

    def messages(self, item: "JudgeItem") -> list[dict[str, str]]:
        refs = "\n".join(f"- {r}" for r in item.references) or "- (none)"
        user = self.user.format(question=item.question, references=refs, prediction=item.prediction)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


_ANSWER_CORRECTNESS_V1 = PromptTemplate(
    id="answer_correctness",
    version=1,
    system=(
        "You are a strict grader of answers about images and videos. Compare the candidate answer "
        "with the reference answers and judge whether it is correct. Reply with only a JSON object "
        '{"score": S, "reason": "<one sentence>"} where S is 1 if the candidate answer is correct, '
        "0 if it is wrong, and a number between 0 and 1 if it is partially correct."
    ),
    user="Question: {question}\nReference answers:\n{references}\nCandidate answer: {prediction}",
)

TEMPLATES: dict[tuple[str, int], PromptTemplate] = {
    (t.id, t.version): t for t in (_ANSWER_CORRECTNESS_V1,)
}


def get_template(template_id: str, version: int) -> PromptTemplate:
    """The template (id, version); raises JudgeError listing the known ones when absent."""
    try:
        return TEMPLATES[(template_id, int(version))]
    except (KeyError, ValueError, TypeError):
        known = ", ".join(t.tag for t in TEMPLATES.values())
        raise JudgeError(f"unknown judge template {template_id}@v{version}; known: {known}") from None


# --- records ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeItem:
    """One answer to grade: the sample id (for messages), question, reference answers, prediction."""

    sample_id: str
    question: str
    references: Sequence[str]
    prediction: str


# --- verdict parsing --------------------------------------------------------------------------------


def parse_verdict(reply: str | None) -> tuple[float | None, str, str | None]:
    """Parse a judge reply into (score, reason, error); see the module docstring for the format.

    Returns (score in [0, 1], reason, None) or (None, why it is unscored, "parse: ...").
    """
    if not reply or not reply.strip():
        return None, "the judge returned an empty reply", "parse: empty reply"
    decoder = json.JSONDecoder()
    start = reply.find("{")
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(reply, start)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict) and "score" in obj:
            score, reason = obj["score"], obj.get("reason", "")
            # bool is an int in Python; "true" is not a score
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 <= score <= 1.0:
                why = f"verdict score {score!r} is not a number in [0, 1]"
                return None, why, f"parse: {why}"
            return float(score), str(reason), None
        start = reply.find("{", start + 1)
    excerpt = reply.strip().replace("\n", " ")[:200]
    return None, f'no JSON {{"score": ..., "reason": ...}} in the judge reply: {excerpt!r}', "parse: no JSON verdict"


# --- cache ------------------------------------------------------------------------------------------


def cache_key(model: str, template: PromptTemplate, item: JudgeItem, settings: dict | None = None) -> str:
    """sha256 hex of (judge model, template id, version, question, references, prediction) plus the
    settings that can change a verdict (server, temperature, max_tokens) when given."""
    payload = json.dumps(
        [model, template.id, template.version, item.question, list(item.references), item.prediction]
        + ([settings] if settings else []),
        ensure_ascii=False, sort_keys=True,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class JudgeCache:
    """Directory of JSON replies keyed by `cache_key`; safe for concurrent writers (atomic replace)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored record, or None when absent or unreadable (then it is redone and rewritten)."""
        path = self.path(key)
        try:
            record = files.loads(files.read_text(path, "judge cache entry"), str(path), duplicates="last")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, DatasetFormatError) as exc:
            log.warning("judge cache: ignoring unreadable %s (%s)", path, exc)
            return None
        return record if isinstance(record, dict) and isinstance(record.get("reply"), str) else None

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        # readers see either no file or a complete one; with two writers the last one wins
        write_atomic(self.path(key), json.dumps(record, ensure_ascii=False))


# --- the judge --------------------------------------------------------------------------------------


class Judge:
    """LLM judge over an OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, llama.cpp...).

    model, base_url:   the judge model name and the endpoint (e.g. "http://localhost:8000/v1").
    api_key:           None = the OPENAI_API_KEY environment variable; servers without auth accept
                       any string, e.g. "EMPTY". Raises JudgeError when neither is set.
    template, template_version: a PromptTemplate in TEMPLATES.
    timeout_s:         per-request timeout in seconds.
    max_retries:       retries after the first attempt on HTTP 429, 5xx, timeouts and connection
                       errors (the openai client's own retries are off so this loop is the only one).
    backoff_s, backoff_max_s: wait backoff_s * 2**attempt seconds before retry attempt+1, capped.
    max_concurrency:   requests in flight at most (threads of score_many).
    cache_dir:         None = ~/.cache/rvt-bench/judge (moved by RVT_BENCH_CACHE or XDG_CACHE_HOME:
                       rvt_bench.core.paths.cache_root); "" disables the cache.
    temperature, max_tokens: sampling settings sent with every request.
    Raises JudgeError on a missing model or API key, an unknown template or bad limits. Network
    errors never raise: they become unscored verdicts.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        template: str = "answer_correctness",
        template_version: int = 1,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
        max_concurrency: int = 8,
        cache_dir: str | os.PathLike | None = None,
        temperature: float = 0.0,
        max_tokens: int = 256,
    ):
        import openai  # imported here: only a configured judge needs the client

        if not model or model == "???":
            raise JudgeError("judge: `model` is required (e.g. judge.model=gpt-4o-mini)")
        if max_concurrency < 1 or max_retries < 0:
            raise JudgeError(f"judge: need max_concurrency >= 1 and max_retries >= 0, got {max_concurrency}, {max_retries}")
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            raise JudgeError(
                f"judge at {base_url}: no API key; set OPENAI_API_KEY or judge.api_key "
                '(any string, e.g. "EMPTY", for a server without auth)'
            )
        self.model = model
        self.base_url = base_url
        self.template = get_template(template, template_version)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_concurrency = int(max_concurrency)
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        if cache_dir is None:
            cache_dir = cache_root() / "judge"
        self.cache = JudgeCache(cache_dir) if str(cache_dir) else None
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)

    def __str__(self) -> str:
        return f"judge: {self.model} at {self.base_url}, template {self.template.tag}"

    def _verdict(self, reply: str, cached: bool) -> JudgeVerdict:
        score, reason, error = parse_verdict(reply)
        return JudgeVerdict(score, reason, cached, error, self.template.tag, self.model, reply)

    def _failed(self, error: str) -> JudgeVerdict:
        return JudgeVerdict(None, error, False, f"request: {error}", self.template.tag, self.model, None)

    def _request(self, item: JudgeItem) -> str | None:
        """The reply text (None if the response has no content).

        Raises JudgeError naming the sample, the last error and the number of attempts when a
        retryable error persists past max_retries or another API error occurs.
        """
        resp = call_with_retries(
            lambda: self._client.chat.completions.create(
                model=self.model, messages=self.template.messages(item),
                temperature=self.temperature, max_tokens=self.max_tokens,
            ),
            what=f"sample {item.sample_id}", base_url=self.base_url, max_retries=self.max_retries,
            backoff_s=self.backoff_s, backoff_max_s=self.backoff_max_s, error=JudgeError,
        )
        try:
            return resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise JudgeError(f"sample {item.sample_id}: malformed chat-completion response from {self.base_url}: {exc}") from exc

    def score(self, item: JudgeItem) -> JudgeVerdict:
        """Verdict on one item: from the cache when present, else one request (with retries). An item
        holding text no codec accepts (a lone surrogate: rvt_bench.core.codec) is unscored with that
        reason, without a request (its cache key and request body could not be encoded)."""
        texts = [("the question", item.question), ("the prediction", item.prediction),
                 *((f"reference {i}", r) for i, r in enumerate(item.references))]
        why = next((r for r in (unencodable_reason(what, text) for what, text in texts) if r), None)
        if why is not None:
            return JudgeVerdict(None, why, False, f"input: {why}", self.template.tag, self.model, None)
        key = cache_key(self.model, self.template, item,
                        {"base_url": self.base_url, "temperature": self.temperature, "max_tokens": self.max_tokens})
        if self.cache is not None:
            record = self.cache.get(key)
            if record is not None:
                return self._verdict(record["reply"], cached=True)
        try:
            reply = self._request(item)
        except JudgeError as exc:
            return self._failed(str(exc))
        if self.cache is not None and reply is not None:
            self.cache.put(key, {
                "model": self.model, "template": self.template.tag, "question": item.question,
                "references": list(item.references), "prediction": item.prediction, "reply": reply,
            })
        return self._verdict(reply, cached=False)

    def score_many(self, items: Sequence[JudgeItem]) -> list[JudgeVerdict]:
        """Verdicts for items, in order, with at most max_concurrency requests in flight."""
        items = list(items)
        verdicts: list[JudgeVerdict | None] = [None] * len(items)
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool, tqdm(
            total=len(items), desc="judge", leave=False
        ) as bar:
            futures = {pool.submit(self.score, item): i for i, item in enumerate(items)}
            for future, i in futures.items():
                verdicts[i] = future.result()
                bar.update(1)
        return verdicts  # type: ignore[return-value]


def make_judge(cfg: Mapping[str, Any] | None) -> Judge | None:
    """The judge a `judge` config group entry describes, or None for conf/judge/none.yaml.

    cfg: a mapping with `_target_` (null = no judge) and the target's keyword arguments, plus
    optionally `max_failure_rate`, a run-level publishing threshold that is not passed to the
    judge (the runner reads it). Callers that get None print NOT_CONFIGURED and leave judge
    metrics out.
    """
    if cfg is None or cfg.get("_target_") is None:
        return None
    if "max_failure_rate" in cfg:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(cfg, DictConfig):
            # unresolved, so that "???" stays a missing value (reported below as a JudgeError)
            cfg = OmegaConf.create({k: v for k, v in OmegaConf.to_container(cfg, resolve=False).items()
                                    if k != "max_failure_rate"})
        else:
            cfg = {k: v for k, v in cfg.items() if k != "max_failure_rate"}
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate
    from omegaconf.errors import MissingMandatoryValue

    try:
        return instantiate(cfg)
    except MissingMandatoryValue as exc:
        raise JudgeError(f"judge config: a required value is missing ({exc}); e.g. set judge.model") from exc
    except InstantiationException as exc:
        if isinstance(exc.__cause__, JudgeError):
            raise exc.__cause__ from None
        raise JudgeError(f"judge config: cannot build {cfg.get('_target_')}: {exc}") from exc


def judge_banner(judge: Judge | None) -> str:
    """The line a run prints about its judge: NOT_CONFIGURED, or model, endpoint and template."""
    return NOT_CONFIGURED if judge is None else str(judge)


def judge_summary(verdicts: Sequence[JudgeVerdict], max_failure_rate: float = 0.02) -> dict:
    """Aggregate verdicts: mean score over scored ones, with failures counted.

    Returns {"mean": float (NaN if nothing scored), "n": all verdicts, "n_failed": unscored ones,
    "failure_rate": n_failed / n, "publishable": bool, "reason": str | None}; publishable is False
    (with the reason) when there is no verdict or failure_rate > max_failure_rate.
    """
    n = len(verdicts)
    scores = [v.score for v in verdicts if v.scored]
    n_failed = n - len(scores)
    failure_rate = n_failed / n if n else math.nan
    mean = math.fsum(scores) / len(scores) if scores else math.nan
    reason = None
    if n == 0:
        reason = "no judge verdicts"
    elif failure_rate > max_failure_rate:
        reason = f"judge failure rate {failure_rate:.3f} ({n_failed}/{n}) exceeds max_failure_rate {max_failure_rate}"
    return {"mean": mean, "n": n, "n_failed": n_failed, "failure_rate": failure_rate,
            "publishable": reason is None, "reason": reason}
