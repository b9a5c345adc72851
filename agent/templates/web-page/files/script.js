"use strict";

// The page's behaviour goes here.

// Keep this line last: tests/check_page.py reads it to know that the whole script ran.
document.body.dataset.ready = "yes";
