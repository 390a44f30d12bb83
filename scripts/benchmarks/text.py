"""One epoch of text_cnn (src/clusterable/conf/model/text_cnn.yaml) + CCE on 94,721 fake documents of 25 tokens
(50,000-word vocabulary, 300-d vectors) through the framework against a plain loop (goal: ratio <= 1.2); GloVe's
reader restricted to 50,000 words from a generated 2.2-million-line 300-d file: seconds and peak extra memory of the
scan, seconds from its cache; the one-time AGNews-8 corpus build (read_agnews8: read, sample, spaCy
preprocessing, cache) from a generated newsSpace dump of 20,000 documents: seconds per 10,000 documents, seconds
from its cache."""

from __future__ import annotations

import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import torch

from .common import MEMORY_PEAK, MEMORY_PROBE, alternated, indented, run_child
from .loops import framework_loop, plain_loop
from .newsspace import write_newsspace


def _agnews_build(per_topic: int = 2_500) -> dict:
    """The one-time AGNews-8 build (``agnews.read_agnews8``, ``lemmatiser="auto"`` as a run uses it) from a made-up
    AG corpus in the ``newsSpace`` dump format (``write_newsspace``: 8 x ``per_topic`` documents, records in the AG
    corpus's proportion), in a fresh folder, so the build reads, samples, preprocesses, assembles and writes its
    cache; then a second call, served by that cache. spaCy's loading is timed apart (once per process, whatever
    the corpus's size), so that the seconds per 10,000 documents are the build's own."""
    from clusterable.data.text import preprocess
    from clusterable.data.text.agnews import read_agnews8

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "newsSpace"
        start = time.perf_counter()
        records = write_newsspace(path, per_topic)
        out["text_corpus_fixture_write_s"] = time.perf_counter() - start
        out["text_corpus_fixture_mb"] = path.stat().st_size / 1e6
        start = time.perf_counter()
        preprocess.load_preprocessor("auto")  # cached per process: the build below finds it loaded
        out["text_corpus_spacy_load_s"] = time.perf_counter() - start

        def build():
            return read_agnews8(tmp, source="raw", per_topic=per_topic, progress=False)

        start = time.perf_counter()
        corpus = build()
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        again = build()
        out["text_corpus_from_cache_s"] = time.perf_counter() - start
    notes = corpus.notes
    assert not notes["cache_hit"] and again.notes["cache_hit"], (notes["cache_hit"], again.notes["cache_hit"])
    assert notes["records"] == records and not notes["malformed_records"], notes
    assert notes["documents"] == 8 * per_topic, notes
    assert all(torch.equal(corpus.splits[k]["inputs"], again.splits[k]["inputs"]) for k in corpus.splits)
    out.update(
        {
            "text_corpus_build_s": seconds,
            "text_corpus_docs": notes["documents"],
            "text_corpus_records": records,
            "text_corpus_build_per_10k_docs_s": seconds * 10_000 / notes["documents"],
            "text_corpus_vocab": notes["vocab_size"],
            "text_corpus_lemmatiser": notes["lemmatiser"],
        }
    )
    return out


def measure() -> dict:
    """COREL's text CNN on AGNews-8's size (94,721 documents; our fake corpus, ``data.text.fake_corpus``, padded to
    25 tokens, 50,000 words with random 300-d vectors): one epoch through the framework (``loops.framework_loop``)
    against ``loops.plain_loop`` with the same model (``src/clusterable/conf/model/text_cnn.yaml``), CCE head and
    batches of 128; after a warm-up on 5,000 rows, the best of 2 alternated runs each (an epoch is about a minute on
    2 CPU threads). Goal <= 1.2.

    Then ``glove.read_glove`` restricted to a 50,000-word vocabulary (45,000 words in the file, 4,995 not, PAD, UNK
    and the number tokens) from a generated GloVe-format file of 2.2 million lines (``glove.840B.300d.txt``'s
    count; 300 random numbers of 4 or 5 decimals a line, a word with spaces every 50,000 lines), in a fresh
    subprocess that reports the scan's seconds and its peak extra resident memory (as ``retrieval_eval`` does),
    then the seconds of a second call served by the cache. The file's lines reuse 1,000 formatted vectors (the
    reader parses only the wanted words' vectors, so its cost does not depend on their values) so that writing
    5.7 GB takes seconds; it is read back warm from the page cache, not from a cold disk.

    Last, the one-time AGNews-8 corpus build (``_agnews_build``): ``agnews.read_agnews8`` on a generated
    ``newsSpace`` dump of made-up news articles (``newsspace.write_newsspace``; 8 topics of 2,500 documents, 20,000
    in all, among some 211,000 records, the AG corpus's proportion), reading, sampling, spaCy preprocessing,
    assembling and caching: seconds in all and per 10,000 documents (spaCy's loading, once per process, apart),
    then seconds of a second call served by the cache (about 15 seconds in all, generating the file included)."""
    import math

    from hydra import compose, initialize_config_dir

    from clusterable.config import CONFIG_DIR, build
    from clusterable.data.text import fake_corpus, random_vectors
    from clusterable.heads import CCELoss

    n, length, words, classes = 94_721, 25, 50_000, 8
    corpus = fake_corpus(math.ceil(n / classes), length, words, seed=0, num_classes=classes)
    split = {k: v[:n] for k, v in corpus.splits["train"].items()}
    splits = {"train": split, "val": split, "test": split}
    vectors, _ = random_vectors(corpus.vocab, 300, 0)
    small = {k: v[:5000] for k, v in split.items()}
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        node = compose(overrides=["+model=text_cnn"]).model

    def make() -> tuple:
        encoder = build(node, "model", input_shape=[length], word_vectors=vectors)
        return encoder, CCELoss(num_classes=classes, embedding_dim=encoder.embedding_dim)

    torch.manual_seed(0)
    plain_loop(*make(), small, 128, 1)  # warm-up: allocator, kernels, imports
    framework_loop(*make(), {"train": small, "val": small, "test": small}, 128, 1)
    plain, framework = alternated(
        lambda: plain_loop(*make(), split, 128, 1), lambda: framework_loop(*make(), splits, 128, 1), rounds=2
    )
    out: dict = {
        "text_cnn_epoch_ratio": framework / plain,
        "text_cnn_epoch_plain_s": plain,
        "text_cnn_epoch_framework_s": framework,
    }

    lines, found, oov, every = 2_200_000, 45_000, 4_995, 48
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "glove.840B.300d.txt"
        start = time.perf_counter()
        rng = np.random.default_rng(0)
        pool = [
            " ".join(f"{v:.{4 + i % 2}f}" for v in row).encode()
            for i, row in enumerate(rng.normal(0.0, 0.4, (1000, 300)))
        ]
        with open(path, "wb") as f:
            for first in range(0, lines, 10_000):
                f.writelines(
                    (b"a b%d " % i if i % 50_000 == 1 else b"w%d " % i) + pool[i % 1000] + b"\n"
                    for i in range(first, min(first + 10_000, lines))
                )
        out["text_glove_fixture_write_s"] = time.perf_counter() - start
        out["text_glove_fixture_gb"] = path.stat().st_size / 1e9
        child = textwrap.dedent(f"""
            import json, time
            from clusterable.data.text.corpus import PAD, SPECIAL_TOKENS, UNK
            from clusterable.data.text.glove import read_glove
            vocab = [PAD, UNK, *SPECIAL_TOKENS, *(f"w{{k * {every}}}" for k in range({found})),
                     *(f"oov{{k}}" for k in range({oov}))]
            {indented(MEMORY_PROBE, " " * 12)}
            start = time.perf_counter()
            _, stats = read_glove({str(path)!r}, vocab, cache_dir={tmp!r})
            seconds = time.perf_counter() - start
            {indented(MEMORY_PEAK, " " * 12)}
            start = time.perf_counter()
            _, again = read_glove({str(path)!r}, vocab, cache_dir={tmp!r})
            print(json.dumps({{"seconds": seconds, "extra_mb": (peak - before) / 1024, "how": how, "stats": stats,
                              "cached_s": time.perf_counter() - start, "cached": again["cached"]}}))
        """)
        ours = run_child(child)
    assert ours["stats"]["found"] == found and ours["stats"]["oov"] == oov and ours["cached"], ours
    out.update(
        {
            "text_glove_scan_s": ours["seconds"],
            "text_glove_scan_extra_mb": ours["extra_mb"],
            "text_glove_memory_measure": ours["how"],
            "text_glove_lines": ours["stats"]["lines"],
            "text_glove_vocab": found + oov + 5,
            "text_glove_from_cache_s": ours["cached_s"],
        }
    )
    out.update(_agnews_build())
    return out
