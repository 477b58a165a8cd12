"""The import page's upload progress in a browser: a file of a few MB shows a <progress> that
follows the upload, then "processing", then the result; a file over the limit is refused before
it is sent. Screenshots at 1440 and 390 px."""
import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.models import Question
from tests.e2e.conftest import sign_in
from tests.factories import PMFactory, make_project_with_tasks

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HEARTBENCH = Path(__file__).resolve().parents[3] / "shared" / "heartbench" / "question_all.jsonl"


def heartbench_file(tmp_path: Path, copies: int) -> tuple[Path, int]:
    """The real HeartBench rows `copies` times under new ids; returns the path and the row count."""
    rows = [json.loads(line) for line in HEARTBENCH.read_text(encoding="utf-8").splitlines() if line.strip()]
    path = tmp_path / "questions.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for copy in range(copies):
            for n, row in enumerate(rows):
                out.write(json.dumps({**row, "question_id": f"e2e-{copy}-{n}"}, ensure_ascii=False) + "\n")
    return path, copies * len(rows)


def slow_upload(page) -> None:
    """About 1 MB/s up, so the progress of a few MB can be watched on loopback."""
    session = page.context.new_cdp_session(page)
    session.send("Network.enable")
    session.send("Network.emulateNetworkConditions", {"offline": False, "latency": 20,
                                                      "downloadThroughput": 50 * 1024 * 1024,
                                                      "uploadThroughput": 1024 * 1024})


@pytest.mark.parametrize("width", [1440, 390])
def test_a_large_import_shows_its_upload_progress_then_processing_then_the_result(page, live_server, artifacts,
                                                                                   tmp_path, width):
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, items_per_question=2, models=1, pm=pm)
    path, rows = heartbench_file(tmp_path, copies=3)
    assert path.stat().st_size > 2 * 1024 * 1024  # over FILE_UPLOAD_MAX_MEMORY_SIZE: spooled to disk
    page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
    sign_in(page, live_server.url, pm.username)
    page.goto(f"{live_server.url}/projects/{project.pk}/")
    form = page.locator("form[data-upload-progress]").first
    box = form.locator("[data-upload-box]")
    expect(box).to_be_hidden()
    expect(form).to_contain_text("500 MB")

    slow_upload(page)
    form.locator("input[type='file']").set_input_files(str(path))
    form.locator("button[type='submit']").click()

    expect(box).to_have_attribute("data-state", "uploading")
    page.wait_for_function("() => document.querySelector('[data-upload-box] progress').value >= 20")
    expect(box.locator(".upload-status")).to_contain_text("% · ")
    expect(box.locator(".upload-status")).to_contain_text("MB")
    box.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"import-progress-uploading-{width}.png"))
    expect(box).to_have_attribute("data-state", "processing", timeout=30_000)
    page.screenshot(path=str(artifacts / f"import-progress-processing-{width}.png"))

    banner = page.locator(".banner-success")
    expect(banner).to_contain_text("导入完成", timeout=60_000)
    expect(banner).to_contain_text(f"新增 {rows} 条")
    banner.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"import-progress-done-{width}.png"))
    assert Question.objects.filter(project=project).count() == rows + 1
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_a_file_over_the_limit_is_refused_before_it_is_sent(page, live_server, artifacts, tmp_path, settings):
    settings.RUBRICA_MAX_IMPORT_BYTES = 1024 * 1024
    pm = PMFactory()
    project = make_project_with_tasks(n_questions=1, items_per_question=2, models=1, pm=pm)
    path, _ = heartbench_file(tmp_path, copies=2)
    sign_in(page, live_server.url, pm.username)
    page.goto(f"{live_server.url}/projects/{project.pk}/")
    form = page.locator("form[data-upload-progress]").first
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url) if request.method == "POST" else None)

    form.locator("input[type='file']").set_input_files(str(path))
    form.locator("button[type='submit']").click()

    status = form.locator(".upload-status")
    expect(status).to_contain_text("1 MB")
    expect(form.locator("[data-upload-box]")).to_have_attribute("data-state", "error")
    form.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "import-progress-too-large-1440.png"))
    assert requests == []
    assert Question.objects.filter(project=project).count() == 1
