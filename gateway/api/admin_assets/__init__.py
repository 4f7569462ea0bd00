"""The admin page's static files (index.html, admin.css, and the script modules admin.js loads:
api, dom, pager, keys, key_form, credits), shipped as package data.

No build step and no external asset: the page is served as these files are, by
`gateway.api.admin_page`, and talks to /admin/v1 with the admin token the operator types in.
"""

__all__: list[str] = []
