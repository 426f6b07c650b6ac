from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from apps_registry.models import Advisory, Feedback, Record
from apps_registry.services.apps import app_create


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")

    @factory.post_generation
    def email_confirmed(user, create, extracted, **kwargs):
        """The tests' people have confirmed their address (as if they opened the link), unless
        `email_confirmed=False`."""
        if create and extracted is not False:
            from apps_registry.services.email_confirmation import email_confirmed_by_operator

            email_confirmed_by_operator(user=user)


class StaffFactory(UserFactory):
    is_staff = True
    is_superuser = True


def make_app(owner=None, name: str = "Budget", description: str = ""):
    """An app created through the service, so it has its owner membership and storage."""
    return app_create(owner=owner or UserFactory(), name=name, description=description)


class AdvisoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Advisory

    app = factory.LazyFunction(make_app)
    kind = "missing-output-schema"
    severity = "warn"
    summary = "Route add_expense has no output schema."
    user_summary = "One of this app's actions does not describe its result."


class FeedbackFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Feedback

    app = factory.LazyFunction(make_app)
    author = factory.LazyAttribute(lambda f: f.app.owner)
    body = "The add button is confusing."


class RecordFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Record

    storage = factory.LazyAttribute(lambda r: make_app().storage)
    collection = "expenses"
    record_id = factory.Sequence(lambda n: f"r{n}")
    data = factory.LazyFunction(lambda: {"amount": 1.5})
