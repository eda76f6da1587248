"""``chash demo``: the gateway on real traffic, in about half a minute.

Two scenarios, each in one process on 127.0.0.1:

* ``run_demo`` (``chash demo``): users with sessions on three backends;
  one backend stops and restarts; only its users move, and exactly they
  come back (``chash.demo.sessions``).
* ``run_rooms_demo`` (``chash demo --rooms``): players in chat rooms over
  WebSocket; one backend dies; its rooms' players reconnect to one new
  node together, every other room stays (``chash.demo.rooms``).

The backends are in ``chash.demo.backends``, the timeline both print in
``chash.demo.timeline``.  ``chash.demo.engine`` is a stand-in for an
OpenAI-compatible inference engine (``StandInEngine``: a prompt cache,
streamed tokens), for the tests of ``chash gateway --affinity prefix`` and
``run_llm_demo`` (``chash demo --llm``: completions replayed through the
gateway for each policy, ``chash.demo.llm``).
"""

from chash.demo.backends import RoomBackend, SessionBackend
from chash.demo.engine import StandInEngine
from chash.demo.llm import LlmDemoResult, PolicyRun, render_llm, run_llm_demo
from chash.demo.rooms import RoomsResult, render_rooms, run_rooms_demo
from chash.demo.sessions import DemoResult, Visit, render_figures, run_demo

__all__ = ["DemoResult", "LlmDemoResult", "PolicyRun", "RoomBackend", "RoomsResult",
           "SessionBackend", "StandInEngine", "Visit", "render_figures", "render_llm",
           "render_rooms", "run_demo", "run_llm_demo", "run_rooms_demo"]
