"""Server-rendered pages for people: home, accounts (sign-up, log-in, passwords, deletion), connect an agent."""
