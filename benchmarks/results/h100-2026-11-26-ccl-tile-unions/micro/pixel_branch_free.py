@cuda.jit(device=True)
def pixel(image, y, x, height, width):
    """1 if pixel (y, x) lies inside the image and is foreground, else 0."""
    inside = (y >= 0) & (y < height) & (x >= 0) & (x < width)
    value = image[y * width + x if inside else 0]
    return 1 if inside & (value != 0) else 0
