"use strict";
nav(null);
document.getElementById("path").textContent = window.location.pathname;
