"""Top-level URLs: pages (per app), the v1 API, the OpenAPI schema, admin, i18n."""
from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from core.api_docs import ApiDocsView
from core.health import healthz
from core.metrics import metrics_view
from experts import urls as experts_urls

# JSON under /api/, Django's page elsewhere.
handler404 = "core.not_found.page_not_found"

urlpatterns = [
    # The API first: Django tries the patterns in order, and an expert's loop is all API calls.
    path("api/v1/", include("annotation.api.urls")),
    path("api/v1/", include("payments.api_urls")),
    # Pages without our <link rel="icon"> (the Django admin) make the browser ask for this.
    path("favicon.ico", RedirectView.as_view(url=static("img/favicon.svg"), permanent=True)),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", ApiDocsView.as_view(url_name="schema"), name="api-docs"),
    path("accounts/", include(experts_urls.account_urlpatterns)),
    path("me/", include(experts_urls.me_urlpatterns)),
    path("notifications/", include(experts_urls.notification_urlpatterns)),
    path("payments/", include("payments.urls")),
    path("", include("annotation.urls")),
]
