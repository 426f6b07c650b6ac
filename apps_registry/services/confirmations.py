"""One-time confirmations: a nonce redeemed twice is a replay."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps_registry.models import RedeemedConfirmation


def confirmation_nonce_redeem(*, nonce: str, expires_at: datetime) -> bool:
    """Record `nonce` as used; False when it was used before (by any worker)."""
    RedeemedConfirmation.objects.filter(expires_at__lt=timezone.now()).delete()
    try:
        with transaction.atomic():
            RedeemedConfirmation.objects.create(nonce=nonce, expires_at=expires_at)
    except IntegrityError:
        return False
    return True
