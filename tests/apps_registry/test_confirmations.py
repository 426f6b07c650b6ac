from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps_registry.models import RedeemedConfirmation
from apps_registry.services.confirmations import confirmation_nonce_redeem

pytestmark = pytest.mark.django_db


def test_a_nonce_is_redeemed_once():
    expires = timezone.now() + timedelta(minutes=5)
    assert confirmation_nonce_redeem(nonce="n1", expires_at=expires) is True
    assert confirmation_nonce_redeem(nonce="n1", expires_at=expires) is False
    assert confirmation_nonce_redeem(nonce="n2", expires_at=expires) is True


def test_expired_nonces_are_dropped_when_another_is_redeemed():
    RedeemedConfirmation.objects.create(nonce="old", expires_at=timezone.now() - timedelta(seconds=1))
    confirmation_nonce_redeem(nonce="new", expires_at=timezone.now() + timedelta(minutes=5))
    assert list(RedeemedConfirmation.objects.values_list("nonce", flat=True)) == ["new"]
