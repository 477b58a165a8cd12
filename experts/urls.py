"""Pages of the experts app: sign in and out (Django's auth views; django-axes throttles failed
sign-ins) under accounts/, and notifications."""
from django.contrib.auth import views as auth_views
from django.urls import path

from experts import views

account_urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
]

# Mounted at me/ (beside annotation's me/portrait/): the signed-in expert's own pages.
me_urlpatterns = [
    path("profile/", views.my_profile, name="my_profile"),
]

notification_urlpatterns = [
    path("", views.notifications, name="notifications"),
    path("read/", views.notifications_read, name="notifications_read"),
    path("unread/", views.notifications_badge, name="notifications_badge"),
    path("email/", views.notification_email_preferences, name="notification_email_preferences"),
    path("<int:notification_id>/read/", views.notification_read, name="notification_read"),
    path("<int:notification_id>/open/", views.notification_open, name="notification_open"),
]
