"""The HTTP layer, one module per concept: the routes of running code (``execute``), of
judging (``judge``), of sessions (``sessions``), of grading (``scoring``), of tools (``tools``),
the probes and metrics (``probes``) and the docs (``docs``); how a body is read
(``json_body``), the API key (``auth``), the result cache at the routes (``cached``), the
instance header (``instance``) and every error answer (``errors``).
The app factory that puts them together is :func:`exec_server.app.create_app`."""
