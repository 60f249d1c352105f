"""``nbdist.experimental``: Ray's ``ray.experimental`` names that nbdist provides
(``tqdm_ray``, imported on use)."""
