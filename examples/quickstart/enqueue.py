"""Insert a signup from a script, or a Django or Flask view: `python enqueue.py 8`."""

import sys

import wai

from myapp import Signup

with wai.Client() as client:  # the sync client; the URL from WAI_DATABASE_URL, like myapp's
    job = client.insert(Signup(user_id=int(sys.argv[1])))  # to the kind's queue, "signup"
    print("inserted job", job.id, "on queue", job.queue)
