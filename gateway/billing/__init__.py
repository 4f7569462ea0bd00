"""Money: integer credit units inside, four-decimal strings at the edge (`money`), and what a
call or a task costs (`pricing`)."""
