"""The confirmation step: the first post only asks, the second (confirmed=yes) acts."""
from django.http import HttpResponse
from django.test import RequestFactory

from core.confirm import Confirmation, confirmation_given, confirmation_page


def _confirmation() -> Confirmation:
    return Confirmation(title="Remove Ana?", consequences=["Her 2 open leases end now."],
                        action_url="/projects/1/members/5/remove/", cancel_url="/projects/1/members/",
                        confirm_label="Remove", fields={"reason": "left the team"},
                        inputs=[("reference", "Transfer reference", "", True)])


def test_only_a_post_with_confirmed_yes_counts_as_confirmed():
    factory = RequestFactory()
    assert not confirmation_given(factory.post("/x", {}))
    assert not confirmation_given(factory.post("/x", {"confirmed": "1"}))
    assert not confirmation_given(factory.get("/x", {"confirmed": "yes"}))
    assert confirmation_given(factory.post("/x", {"confirmed": "yes"}))


def test_the_page_says_what_happens_and_reposts_the_fields(rf, db, django_user_model):
    request = rf.post("/projects/1/members/5/remove/")
    request.user = django_user_model.objects.create(username="pm", role="pm")
    response: HttpResponse = confirmation_page(request, _confirmation())
    html = response.content.decode()
    assert response.status_code == 200
    assert "Remove Ana?" in html and "Her 2 open leases end now." in html
    assert 'name="confirmed" value="yes"' in html
    assert 'name="reason" value="left the team"' in html
    assert 'name="reference" value="" required' in html
    assert 'href="/projects/1/members/"' in html


def test_for_htmx_the_question_replaces_the_main_area(rf, db, django_user_model):
    request = rf.post("/x", HTTP_HX_REQUEST="true")
    request.htmx = True
    request.user = django_user_model.objects.create(username="pm", role="pm")
    response = confirmation_page(request, _confirmation())
    assert response["HX-Retarget"] == "#main"
    assert "<html" not in response.content.decode()
    assert "Her 2 open leases end now." in response.content.decode()
