"""The suite's fakes, one module each; a test imports what it needs (``from _fakes.provider import …``).

    provider   an OpenAI-compatible provider that records every call: over loopback HTTP
               (``running_fake``) or in process (``in_process``, a ``Hooks.make_provider``)
    forem      dev.to's Forem API with Forem's rules, for the source tests
    http       ``Wire``, routes for an injected ``httpx.MockTransport``; ``closed_port``
    records    one-line builders of comments, inbox records, seen entries and signal lines
    clock      ``later`` (a ``Hooks.clock``: now, moved on) and ``FakeClock`` (monotonic time
               that moves only when slept)
"""
