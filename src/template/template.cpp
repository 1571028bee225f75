// placeholder: the template work replaces this file
