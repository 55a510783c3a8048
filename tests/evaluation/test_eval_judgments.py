"""Reading judged queries: BEIR and TREC formats detected from the content; clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_support import dataset, qrels, queries

from nautilus_ranking.evaluation.judgments import EvalInputError, read_judgments, read_queries


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_beir_files_of_a_shared_collection_read_as_beir(tmp_path: Path) -> None:
    folder = dataset("adi")
    read = read_queries(folder / "queries.jsonl")
    judged = read_judgments(folder / "qrels" / "test.tsv")
    assert read.format == "beir-jsonl" and read.texts == queries(folder)
    assert judged.format == "beir-tsv" and judged.grades == qrels(folder)
    assert read_judgments(folder).grades == judged.grades  # the collection folder works too


def test_trec_qrels_are_detected_and_equal_the_beir_ones(tmp_path: Path) -> None:
    folder = dataset("cranfield")  # graded 1-4
    beir = qrels(folder)
    lines = [f"{q} 0 {d} {g}" for q, per in beir.items() for d, g in per.items()]
    trec = read_judgments(write(tmp_path / "qrels.txt", "\n".join(lines) + "\n"))
    assert trec.format == "trec" and trec.grades == beir


def test_trec_topics_and_tsv_queries(tmp_path: Path) -> None:
    topics = write(
        tmp_path / "topics.txt",
        """
<top>
<num> Number: 401
<title> foreign minorities, Germany
<desc> Description:
What language and cultural differences impede the integration?
</top>
<top>
<num> Number: 402 <title> behavioral genetics
</top>
""",
    )
    read = read_queries(topics)
    assert read.format == "trec-topics"
    assert read.texts == {"401": "foreign minorities, Germany", "402": "behavioral genetics"}
    tsv = read_queries(write(tmp_path / "q.tsv", "qid\ttext\n1\tdisk full\n2\tlogin loops\n"))
    assert tsv.format == "tsv" and tsv.texts == {"1": "disk full", "2": "login loops"}


def test_a_headerless_beir_tsv_and_a_repeated_pair(tmp_path: Path) -> None:
    read = read_judgments(write(tmp_path / "q.tsv", "1\td1\t1\n1\td2\t2\n1\td1\t0\n"))
    assert read.format == "beir-tsv" and read.grades == {"1": {"d1": 0, "d2": 2}}
    assert read.repeated == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("query-id\tcorpus-id\tscore\n1\td1\n", "q.txt:2: expected 3 columns"),
        ("1 0 d1 high\n", "q.txt:1: grade 'high' is not an integer"),
        ("1 0 d1 1 extra stuff\n", "expected a BEIR qrels line"),
        ("", "empty judgments file"),
    ],
)
def test_bad_judgments_name_the_file_line_and_the_expected_form(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(EvalInputError, match=message):
        read_judgments(write(tmp_path / "q.txt", text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"_id": "1", "text": "ok"}\n{"title": "no id"}\n',
            r"q.txt: query #2: expected fields '_id'",
        ),
        ('{"_id": "1", "text": "ok"}\n{broken\n', "q.txt:2: not valid JSON"),
        ("just some words\n", r"q.txt:1: expected 'query-id<TAB>text'"),
        ("<top><num> Number: 1</top>", "topic #1 needs a <num> and a non-empty <title>"),
    ],
)
def test_bad_queries_name_the_file_line_and_the_expected_form(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(EvalInputError, match=message):
        read_queries(write(tmp_path / "q.txt", text))


def test_a_missing_file_and_an_ambiguous_folder(tmp_path: Path) -> None:
    with pytest.raises(EvalInputError, match="no such file"):
        read_queries(tmp_path / "nope.jsonl")
    (tmp_path / "qrels").mkdir()
    write(tmp_path / "qrels" / "dev.tsv", "1\td\t1\n")
    write(tmp_path / "qrels" / "train.tsv", "1\td\t1\n")
    with pytest.raises(EvalInputError, match=r"without test\.tsv .*dev\.tsv, train\.tsv"):
        read_judgments(tmp_path)


@pytest.mark.parametrize(
    ("grade", "shown"),
    [
        ("9" * 400, r"'999999999999'… \(400 characters\)"),
        ("1e400", "'1e400'"),
        ("101", "'101'"),
        ("-101", "'-101'"),
        ("1e300", "'1e300'"),
    ],
)
def test_a_grade_out_of_range_names_the_file_the_line_and_the_bound(
    tmp_path: Path, grade: str, shown: str
) -> None:
    path = write(tmp_path / "q.txt", f"1 0 d1 1\n1 0 d2 {grade}\n")
    with pytest.raises(
        EvalInputError,
        match=rf"q\.txt:2: grade {shown} is out of range: "
        r"a grade is an integer from -100 to 100",
    ):
        read_judgments(path)


def test_grades_at_the_bound_and_written_as_floats_are_read(tmp_path: Path) -> None:
    path = write(tmp_path / "q.txt", "1 0 a 100\n1 0 b -100\n1 0 c 2.0\n")
    assert read_judgments(path).grades == {"1": {"a": 100, "b": -100, "c": 2}}
    with pytest.raises(EvalInputError, match="grade 'nan' is not an integer"):
        read_judgments(write(tmp_path / "n.txt", "1 0 a nan\n"))


def test_only_the_asked_queries_judgments_are_kept(tmp_path: Path) -> None:
    """A judgments file far larger than the queries asked about costs the asked ones."""
    lines = "".join(f"{q} 0 d{d} 1\n" for q in ("1", "2", "3") for d in range(3))
    read = read_judgments(write(tmp_path / "q.txt", lines), queries={"2"})
    assert read.grades == {"2": {"d0": 1, "d1": 1, "d2": 1}}
    assert read.elsewhere == ["1", "3"]
    assert read_judgments(tmp_path / "q.txt").grades.keys() == {"1", "2", "3"}


def test_a_line_without_an_end_is_refused_at_its_bound(tmp_path: Path) -> None:
    path = write(tmp_path / "q.txt", "1 0 d1 1\n1 0 " + "d" * (70 << 10) + " 1\n")
    with pytest.raises(EvalInputError, match=r"q\.txt:2: line longer than 65,536 bytes"):
        read_judgments(path)


def test_a_judgments_file_past_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "q.txt"
    with path.open("wb") as handle:  # sparse: no disk, refused from its size
        handle.truncate((512 << 20) + 1)
    with pytest.raises(EvalInputError, match="larger than 536,870,912 bytes"):
        read_judgments(path)


def test_crlf_lines_and_a_bom_read_as_plain_lines(tmp_path: Path) -> None:
    path = tmp_path / "q.tsv"
    path.write_bytes(b"\xef\xbb\xbfquery-id\tcorpus-id\tscore\r\n1\td1\t2\r\n")
    assert read_judgments(path).grades == {"1": {"d1": 2}}


def test_relevant_only_keeps_what_the_metrics_read(tmp_path: Path) -> None:
    """Grades below 1 count in no metric: eval keeps only the relevant ones, and a query
    judged with none still counts as judged (an empty entry); the last line still wins."""
    text = "1 0 a 2\n1 0 b 0\n1 0 c -1\n2 0 d 0\n1 0 e 1\n1 0 e 0\n"
    read = read_judgments(write(tmp_path / "q.txt", text), relevant_only=True)
    assert read.grades == {"1": {"a": 2}, "2": {}}
    full = read_judgments(tmp_path / "q.txt")
    assert full.grades == {"1": {"a": 2, "b": 0, "c": -1, "e": 0}, "2": {"d": 0}}
