"""The front door: typed JSON and upload routes in front of Triton, with limits, overload answers and a page.

Triton speaks its v2 tensor protocol only, has no body limit in 2.51 and answers overload with 503
and no Retry-After. The door takes the requests people already send (`{"text": ...}`, a form
upload), checks them whole against the limits of the served configs, and sends Triton complete
requests over gRPC. See docs/DOOR.md.
"""
