"""``nbdist.air.integrations``: Ray AIR's framework integrations (``keras``)."""
