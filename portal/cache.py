"""The portal's Redis cache: Django's, plus the one operation the API's per-token throttle makes on every request."""

from functools import cached_property

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache


class RedisCache(DjangoRedisCache):
    def incr_window(self, key: str, timeout: int) -> int:
        """The count after one more request in a fixed window: the counter is created with its expiry when it is new,
        then incremented, in one round trip (Django's add and incr take three: SET NX, EXISTS, INCR)."""
        key = self.make_and_validate_key(key)
        pipeline = self._writer.pipeline(transaction=False)
        pipeline.set(key, 0, ex=timeout, nx=True)
        pipeline.incr(key)
        return pipeline.execute()[1]

    @cached_property
    def _writer(self):
        # Django builds a client object for every operation; on this path that costs more than the round trip.
        return self._cache.get_client(write=True)
