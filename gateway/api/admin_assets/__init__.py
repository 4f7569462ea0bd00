"""The admin page's static files (index.html, admin.js, admin.css), shipped as package data.

No build step and no external asset: the page is served as these files are, by
`gateway.api.admin_page`, and talks to /admin/v1 with the admin token the operator types in.
"""

__all__: list[str] = []
