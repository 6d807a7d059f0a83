"""The curators' console: server-rendered pages under ``/console/`` served by the REST API
process, so the API's request guard (Host, Origin, body) covers them too.

- ``sessions``: sign-in turns an API key (or, in local-dev, the one-time token of
  ``console_url``) into a server-side session behind an HttpOnly, SameSite=Strict cookie;
  the key itself is never kept by the browser.
- ``security``: the headers every console response carries (CSP without inline script,
  ``frame-ancestors 'none'``, ``no-store``) and the CSRF check of every form.
- ``pages``: the routes; each action is the same knowledge RPC the REST curation routes and
  ``vera curate`` make, after the same curator check.
- ``templates`` and ``static``: Jinja templates (autoescaped) and the one stylesheet and
  script, shipped in the package; nothing is fetched from elsewhere.
"""
